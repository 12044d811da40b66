//! A Jacobian's sparsity, and columns that forward mode may take together.
//!
//! Each value of the root depends on some of the parameter values; the
//! ops' `reads` rules (`core::rules`) say which, from the structure of the
//! graph and the exact zeros of its constants (a stencil written as a dense
//! constant matrix). Two columns that no row shares may share a tangent
//! direction: along eⱼ + eₖ, row i sees only the one it depends on. So
//! forward mode takes one direction per color of a greedy coloring of the
//! columns (Curtis, Powell and Reid's idea), and each entry is read back
//! from its column's color.
//!
//! An entry the pattern has comes out of the same operations as along eⱼ
//! alone, since every value it is made of sees the same tangents; only an
//! exact zero's sign may differ, where a zero constant times another
//! column's tangent adds −0. An entry the pattern has not is +0. Where a
//! tangent is not finite, so may be the entries that share its direction:
//! the callers then take the rows by reverse, as for any entry that is not.

use super::graph::Graph;
use super::op::Op;
use super::rules::{self, Reads};

/// At most this many words of 64 columns held in all, and as many
/// operations spent: past them a graph is taken as dense.
const BUDGET: usize = 1 << 20;

/// The colors of a Jacobian's columns.
#[derive(Clone, Debug, PartialEq)]
pub struct Colors {
    /// How many directions: one per color.
    pub count: usize,
    /// Each column's color.
    pub color: Vec<u32>,
    /// Row-major rows × `count`: the column of that color row i depends on,
    /// `u32::MAX` where none.
    pub owner: Vec<u32>,
}

impl Colors {
    /// The Jacobian (rows × columns, row-major, into `out`) from the
    /// tangents along each color's direction, `tangents` rows × `count`.
    pub fn scatter(&self, tangents: &[f64], out: &mut [f64]) {
        let q = self.color.len();
        for ((row, owners), t) in out.chunks_exact_mut(q).zip(self.owner.chunks_exact(self.count)).zip(tangents.chunks_exact(self.count)) {
            row.fill(0.0);
            for (&j, &x) in owners.iter().zip(t) {
                if j != u32::MAX {
                    row[j as usize] = x;
                }
            }
        }
    }

    /// As one list, for JavaScript: the count, each column's color, then
    /// the owners.
    pub fn flat(&self) -> Vec<u32> {
        std::iter::once(self.count as u32).chain(self.color.iter().copied()).chain(self.owner.iter().copied()).collect()
    }

    /// Color c's direction into `out` (q values).
    pub fn direction(&self, c: usize, out: &mut [f64]) {
        for (o, &k) in out.iter_mut().zip(&self.color) {
            *o = if k as usize == c { 1.0 } else { 0.0 };
        }
    }
}

/// Which columns each value of a node depends on, 64 to a word.
enum Support {
    /// None: the node does not depend on the parameters.
    Empty,
    /// The same set for every value.
    Uniform(Vec<u64>),
    /// One set per value, one after another.
    Each(Vec<u64>),
}

impl Support {
    fn of(&self, e: usize, words: usize) -> Option<&[u64]> {
        match self {
            Support::Empty => None,
            Support::Uniform(s) => Some(s),
            Support::Each(s) => Some(&s[e * words..(e + 1) * words]),
        }
    }

    /// Every value's set together.
    fn union(&self, words: usize) -> Option<Vec<u64>> {
        match self {
            Support::Empty => None,
            Support::Uniform(s) => Some(s.clone()),
            Support::Each(s) => {
                let mut u = vec![0; words];
                s.chunks_exact(words).for_each(|row| or_into(&mut u, row));
                Some(u)
            }
        }
    }
}

fn or_into(to: &mut [u64], from: &[u64]) {
    to.iter_mut().zip(from).for_each(|(t, f)| *t |= f);
}

/// The colors of the Jacobian of `root` (flattened) over `q` parameter
/// values, which `sources` lay out: leaf node and its first column. `None`
/// where coloring would not take fewer groups of `group` directions (a
/// plan's lanes) than the columns themselves, or the graph is past the budget.
pub fn colors(g: &Graph, root: u32, sources: &[(u32, usize)], q: usize, group: usize) -> Option<Colors> {
    let group = group.max(1);
    if q.div_ceil(group) <= 1 {
        return None;
    }
    let words = q.div_ceil(64);
    let support = supports(g, root, sources, q, words)?;
    let m = g.nodes[root as usize].shape.size();
    let rows: Vec<Vec<u32>> = (0..m).map(|e| support[root as usize].of(e, words).map_or_else(Vec::new, columns)).collect();
    // No coloring takes fewer colors than the densest row has entries.
    let densest = rows.iter().map(Vec::len).max().unwrap_or(0);
    let work = rows.iter().try_fold(0usize, |w, r| w.checked_add(r.len().checked_mul(r.len())?));
    if densest.div_ceil(group) >= q.div_ceil(group) || work.is_none_or(|w| w > BUDGET) {
        return None;
    }
    let color = greedy(&rows, q);
    let count = color.iter().max().map_or(0, |&c| c as usize + 1);
    if count.div_ceil(group) >= q.div_ceil(group) {
        return None;
    }
    let mut owner = vec![u32::MAX; m * count];
    for (i, row) in rows.iter().enumerate() {
        row.iter().for_each(|&j| owner[i * count + color[j as usize] as usize] = j);
    }
    Some(Colors { count, color, owner })
}

/// The columns a set holds, in order.
fn columns(set: &[u64]) -> Vec<u32> {
    let mut out = Vec::new();
    for (w, &bits) in set.iter().enumerate() {
        let mut b = bits;
        while b != 0 {
            out.push((w * 64 + b.trailing_zeros() as usize) as u32);
            b &= b - 1;
        }
    }
    out
}

/// Column by column, the least color that no earlier column sharing a row holds.
fn greedy(rows: &[Vec<u32>], q: usize) -> Vec<u32> {
    let mut by_column: Vec<Vec<u32>> = vec![Vec::new(); q];
    for (i, row) in rows.iter().enumerate() {
        row.iter().for_each(|&j| by_column[j as usize].push(i as u32));
    }
    let mut color = vec![u32::MAX; q];
    // taken[c] == j + 1: a column sharing a row with column j holds color c.
    let mut taken: Vec<usize> = Vec::new();
    for j in 0..q {
        for &i in &by_column[j] {
            for &k in &rows[i as usize] {
                if let Some(t) = taken.get_mut(color[k as usize] as usize) {
                    *t = j + 1;
                }
            }
        }
        let c = taken.iter().position(|&t| t != j + 1).unwrap_or(taken.len());
        if c == taken.len() {
            taken.push(0);
        }
        color[j] = c as u32;
    }
    color
}

/// Each node's support, up to `root`, from the ops' `reads` rules; `None`
/// past the budget, or where a node's operand comes after it.
fn supports(g: &Graph, root: u32, sources: &[(u32, usize)], q: usize, words: usize) -> Option<Vec<Support>> {
    let mut support: Vec<Support> = (0..=root).map(|_| Support::Empty).collect();
    let mut spent = 0usize;
    // Words of sets, or operations on them, charged against the budget.
    let mut charge = |amount: Option<usize>| -> Option<()> {
        spent = amount.and_then(|a| spent.checked_add(a)).filter(|&s| s <= BUDGET)?;
        Some(())
    };
    for &(leaf, at) in sources {
        let size = g.nodes.get(leaf as usize)?.shape.size();
        if leaf > root || at.checked_add(size).is_none_or(|end| end > q) {
            continue;
        }
        charge(size.checked_mul(words))?;
        let mut s = vec![0u64; size * words];
        for e in 0..size {
            let j = at + e;
            s[e * words + j / 64] |= 1 << (j % 64);
        }
        support[leaf as usize] = Support::Each(s);
    }
    // A value known to be an exact zero, whatever the parameters and inputs.
    let zero = |id: u32, i: usize, support: &[Support]| {
        let n = &g.nodes[id as usize];
        n.op == Op::Const && matches!(support[id as usize], Support::Empty) && g.values.get(n.val + i) == Some(&0.0)
    };
    for id in 0..=root {
        let node = g.nodes.get(id as usize)?;
        if node.parents.iter().any(|&p| p >= id) {
            return None;
        }
        if node.op.is_leaf() || node.parents.iter().all(|&p| matches!(support[p as usize], Support::Empty)) {
            continue;
        }
        let size = node.shape.size();
        let shapes: Vec<_> = node.parents.iter().map(|&p| g.nodes[p as usize].shape).collect();
        let reads = if node.op == Op::External { Reads::All } else { rules::reads(node.op) };
        if !matches!(reads, Reads::All) {
            charge(size.checked_mul(words))?;
        }
        let made = match reads {
            Reads::All => {
                let mut u = vec![0; words];
                for &p in &node.parents {
                    if let Some(s) = support[p as usize].union(words) {
                        or_into(&mut u, &s);
                    }
                }
                Support::Uniform(u)
            }
            Reads::Elementwise => {
                let mut s = vec![0; size * words];
                for (e, row) in s.chunks_exact_mut(words).enumerate() {
                    for (&p, shape) in node.parents.iter().zip(&shapes) {
                        let len = shape.size();
                        let i = if len == 1 { 0 } else if len == size { e } else { e % len };
                        if let Some(from) = support[p as usize].of(i, words) {
                            or_into(row, from);
                        }
                    }
                }
                Support::Each(s)
            }
            Reads::Pairs => {
                let mut s = vec![0; size * words];
                rules::pairs(node.op, &shapes, node.shape, |e, k, i| {
                    if let Some(from) = support[node.parents[k] as usize].of(i, words) {
                        or_into(&mut s[e * words..(e + 1) * words], from);
                    }
                });
                Support::Each(s)
            }
            Reads::Product => {
                let (m, t, n) = rules::product_dims(node.op, &shapes);
                charge(m.checked_mul(t).and_then(|x| x.checked_mul(n)).and_then(|x| x.checked_mul(words)))?;
                let mut s = vec![0; size * words];
                let (a, b) = (node.parents[0], node.parents[1]);
                for (rc, row) in s.chunks_exact_mut(words).enumerate() {
                    let (r, c) = (rc / n, rc % n);
                    for k in 0..t {
                        let (ia, ib) = (r * t + k, k * n + c);
                        if !zero(a, ia, &support) {
                            if let Some(from) = support[b as usize].of(ib, words) {
                                or_into(row, from);
                            }
                        }
                        if !zero(b, ib, &support) {
                            if let Some(from) = support[a as usize].of(ia, words) {
                                or_into(row, from);
                            }
                        }
                    }
                }
                Support::Each(s)
            }
        };
        support[id as usize] = made;
    }
    Some(support)
}

#[cfg(test)]
mod tests {
    use super::{colors, Colors};
    use crate::core::graph::Graph;
    use crate::core::op::Op;
    use crate::core::shape::Shape;

    /// Row i's columns by its owners, sorted.
    fn row(c: &Colors, i: usize) -> Vec<u32> {
        let mut r: Vec<u32> = c.owner[i * c.count..(i + 1) * c.count].iter().copied().filter(|&j| j != u32::MAX).collect();
        r.sort_unstable();
        r
    }

    /// Every row's columns hold distinct colors, and each is its color's owner there.
    fn check_valid(c: &Colors) {
        for i in 0..c.owner.len() / c.count {
            for &j in &row(c, i) {
                assert_eq!(c.owner[i * c.count + c.color[j as usize] as usize], j);
            }
        }
    }

    /// A constant n×n matrix with `keep(i, j)`'s entries set, else exact zeros.
    fn stencil(g: &mut Graph, n: usize, keep: impl Fn(usize, usize) -> bool) -> u32 {
        let data: Vec<f64> = (0..n * n).map(|e| if keep(e / n, e % n) { 1.0 + (e % 7) as f64 } else { 0.0 }).collect();
        g.leaf(Op::Const, Shape::Matrix(n, n), &data).unwrap()
    }

    #[test]
    fn a_stencil_written_as_a_dense_constant_takes_three_colors() {
        let n = 30;
        let mut g = Graph::default();
        let u = g.leaf(Op::Leaf, Shape::Vector(n), &vec![0.5; n]).unwrap();
        let d = stencil(&mut g, n, |i, j| i.abs_diff(j) <= 1);
        let du = g.op(Op::Matmul, &[d, u], true).unwrap();
        let sq = g.op(Op::Square, &[u], true).unwrap();
        let root = g.op(Op::Add, &[du, sq], true).unwrap();
        let c = colors(&g, root, &[(u, 0)], n, 8).expect("colored");
        assert_eq!(c.count, 3);
        check_valid(&c);
        for i in 0..n {
            let want: Vec<u32> = (i.saturating_sub(1)..(i + 2).min(n)).map(|j| j as u32).collect();
            assert_eq!(row(&c, i), want, "row {i}");
        }
    }

    #[test]
    fn slices_concatenation_transpose_and_reshape_move_columns() {
        // A 4×5 matrix of parameters, transposed and flattened, then its
        // first row's neighbours differenced: each row reads one or two columns.
        let (m, n) = (4, 5);
        let mut g = Graph::default();
        let p = g.leaf(Op::Leaf, Shape::Vector(m * n), &vec![0.1; m * n]).unwrap();
        let a = g.op(Op::Reshape(Shape::Matrix(m, n)), &[p], true).unwrap();
        let t = g.op(Op::Transpose, &[a], true).unwrap();
        let flat = g.op(Op::Reshape(Shape::Vector(m * n)), &[t], true).unwrap();
        let tail = g.op(Op::Slice { start: [1, 0], size: [m * n - 1, 0] }, &[flat], true).unwrap();
        let head = g.op(Op::Slice { start: [0, 0], size: [m * n - 1, 0] }, &[flat], true).unwrap();
        let diff = g.op(Op::Sub, &[tail, head], true).unwrap();
        let root = g.op(Op::Concat { axis: 0 }, &[flat, diff], true).unwrap();
        let c = colors(&g, root, &[(p, 0)], m * n, 8).expect("colored");
        check_valid(&c);
        // Flat entry e = j·m + i of the transpose is parameter i·n + j.
        let source = |e: usize| ((e % m) * n + e / m) as u32;
        for e in 0..m * n {
            assert_eq!(row(&c, e), vec![source(e)]);
        }
        for e in 0..m * n - 1 {
            let mut want = vec![source(e), source(e + 1)];
            want.sort_unstable();
            assert_eq!(row(&c, m * n + e), want);
        }
    }

    #[test]
    fn a_scalar_parameter_every_row_reads_takes_a_color_of_its_own() {
        let n = 20;
        let mut g = Graph::default();
        let u = g.leaf(Op::Leaf, Shape::Vector(n), &vec![0.5; n]).unwrap();
        let s = g.leaf(Op::Leaf, Shape::Scalar, &[2.0]).unwrap();
        let e = g.op(Op::Exp, &[u], true).unwrap();
        let root = g.op(Op::Mul, &[e, s], true).unwrap();
        let c = colors(&g, root, &[(u, 0), (s, n)], n + 1, 8).expect("colored");
        assert_eq!(c.count, 2);
        check_valid(&c);
        (0..n).for_each(|i| assert_eq!(row(&c, i), vec![i as u32, n as u32]));
    }

    #[test]
    fn random_sparse_constants_color_validly() {
        let n = 40;
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize
        };
        for _ in 0..20 {
            let keep: Vec<bool> = (0..n * n).map(|_| next() % 10 == 0).collect();
            let mut g = Graph::default();
            let u = g.leaf(Op::Leaf, Shape::Vector(n), &vec![0.5; n]).unwrap();
            let d = stencil(&mut g, n, |i, j| keep[i * n + j]);
            let root = g.op(Op::Matmul, &[d, u], true).unwrap();
            let Some(c) = colors(&g, root, &[(u, 0)], n, 8) else { continue };
            check_valid(&c);
            for i in 0..n {
                let want: Vec<u32> = (0..n).filter(|&j| keep[i * n + j]).map(|j| j as u32).collect();
                assert_eq!(row(&c, i), want);
            }
        }
    }

    #[test]
    fn dense_jacobians_take_no_colors() {
        let n = 20;
        let mut g = Graph::default();
        let u = g.leaf(Op::Leaf, Shape::Vector(n), &vec![0.5; n]).unwrap();
        let d = stencil(&mut g, n, |_, _| true);
        let dense = g.op(Op::Matmul, &[d, u], true).unwrap();
        assert!(colors(&g, dense, &[(u, 0)], n, 8).is_none());
        let total = g.op(Op::Sum, &[u], true).unwrap();
        let spread = g.op(Op::Mul, &[u, total], true).unwrap();
        assert!(colors(&g, spread, &[(u, 0)], n, 8).is_none());
        // Eight columns or fewer: one group of lanes either way.
        let small = g.leaf(Op::Leaf, Shape::Vector(8), &[0.5; 8]).unwrap();
        let e = g.op(Op::Exp, &[small], true).unwrap();
        assert!(colors(&g, e, &[(small, 0)], 8, 8).is_none());
    }
}
