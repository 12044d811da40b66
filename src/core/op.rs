//! The one Op enum, its static arguments, its exported name and its shape rule.

use super::error::{js_number, Result};
use super::shape::Shape;
use crate::fail;
use smallvec::SmallVec;

/// Parent node indices; most ops have one or two.
pub type Parents = SmallVec<[u32; 2]>;

/// A pow exponent, held by its bits so that `Op` can be hashed for merging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Exponent(u64);

impl Exponent {
    pub const fn new(k: f64) -> Self {
        Exponent(k.to_bits())
    }
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

/// How a binary elementwise op lines its operands up (SPEC §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broadcast {
    Same,
    /// The left operand is a scalar.
    ScalarLeft,
    /// The right operand is a scalar.
    ScalarRight,
    /// The left operand is a vector applied to every row of the right matrix.
    RowLeft,
    /// The right operand is a vector applied to every row of the left matrix.
    RowRight,
}

/// Declares `Op` and `Op::ALL` from one list, each variant with an example
/// of it, so that no op can be missing from `ALL` (tests/adjoints.rs checks
/// that each has an adjoint test).
macro_rules! ops {
    ($($(#[$doc:meta])* $variant:ident $(($($ty:ty),*))? $({ $($field:ident: $fty:ty),* })? = $example:expr,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Op {
            $($(#[$doc])* $variant $(($($ty),*))? $({ $($field: $fty),* })?,)*
        }

        impl Op {
            /// Every op, once each, by an example of its static arguments.
            pub const ALL: &'static [Op] = &[$($example),*];
        }
    };
}

ops! {
    /// A leaf that receives a gradient: a parameter, or a `variable`.
    Leaf = Op::Leaf,
    /// A leaf fed anew on every replay of a plan, with no gradient.
    Input = Op::Input,
    /// A leaf frozen at trace time.
    Const = Op::Const,
    /// A node built by hand in JavaScript: its value was given and its
    /// adjoint is computed by a JavaScript closure.
    External = Op::External,
    Add = Op::Add,
    Sub = Op::Sub,
    Mul = Op::Mul,
    Div = Op::Div,
    Maximum = Op::Maximum,
    Minimum = Op::Minimum,
    Neg = Op::Neg,
    Exp = Op::Exp,
    Log = Op::Log,
    Sqrt = Op::Sqrt,
    Square = Op::Square,
    Tanh = Op::Tanh,
    Sigmoid = Op::Sigmoid,
    Relu = Op::Relu,
    Lgamma = Op::Lgamma,
    Pow(Exponent) = Op::Pow(Exponent::new(2.0)),
    Sum = Op::Sum,
    Mean = Op::Mean,
    Matmul = Op::Matmul,
    Dot = Op::Dot,
    Transpose = Op::Transpose,
    DiagPart = Op::DiagPart,
    AddDiag = Op::AddDiag,
    Reshape(Shape) = Op::Reshape(Shape::Scalar),
    Slice { start: [usize; 2], size: [usize; 2] } = Op::Slice { start: [0, 0], size: [1, 1] },
    /// Matrices join along `axis`; scalars and vectors flatten (axis unused).
    Concat { axis: u8 } = Op::Concat { axis: 0 },
    Cholesky = Op::Cholesky,
    TriangularSolve { lower: bool } = Op::TriangularSolve { lower: true },
    SolveGeneral = Op::SolveGeneral,
    /// The ops below only tangent rules record (core/rules: elementwise.rs's
    /// digamma, ge and gt, linalg.rs's choleskyTangent): no plan names them
    /// and no JavaScript function makes them.
    Digamma = Op::Digamma,
    Ge = Op::Ge,
    Gt = Op::Gt,
    /// L Φ(L⁻¹ sym(Ȧ) L⁻ᵀ) of a factor L and a tangent Ȧ of what it
    /// factors: the Cholesky tangent as one op (`kernels/factor_tangent.rs`).
    CholeskyTangent = Op::CholeskyTangent,
}

/// n×n matrices of scratch a choleskyTangent keeps (`kernels::factor_tangent`):
/// M, then two that a call overwrites.
pub const CHOLESKY_TANGENT_AUX: usize = 3;

impl Op {
    /// The name the op is exported under, as written in a plan.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Leaf => "param",
            Op::Input => "input",
            Op::Const => "const",
            Op::External => "external",
            Op::Add => "add",
            Op::Sub => "sub",
            Op::Mul => "mul",
            Op::Div => "div",
            Op::Maximum => "maximum",
            Op::Minimum => "minimum",
            Op::Neg => "neg",
            Op::Exp => "exp",
            Op::Log => "log",
            Op::Sqrt => "sqrt",
            Op::Square => "square",
            Op::Tanh => "tanh",
            Op::Sigmoid => "sigmoid",
            Op::Relu => "relu",
            Op::Lgamma => "lgamma",
            Op::Pow(_) => "pow",
            Op::Sum => "sum",
            Op::Mean => "mean",
            Op::Matmul => "matmul",
            Op::Dot => "dot",
            Op::Transpose => "transpose",
            Op::DiagPart => "diagPart",
            Op::AddDiag => "addDiag",
            Op::Reshape(_) => "reshape",
            Op::Slice { .. } => "slice",
            Op::Concat { .. } => "concat",
            Op::Cholesky => "cholesky",
            Op::TriangularSolve { .. } => "triangularSolve",
            Op::SolveGeneral => "solveGeneral",
            Op::Digamma => "digamma",
            Op::Ge => "greaterEqual",
            Op::Gt => "greater",
            Op::CholeskyTangent => "choleskyTangent",
        }
    }

    /// Operation without static arguments, by exported name.
    pub fn simple(name: &str) -> Option<Op> {
        Some(match name {
            "add" => Op::Add,
            "sub" => Op::Sub,
            "mul" => Op::Mul,
            "div" => Op::Div,
            "maximum" => Op::Maximum,
            "minimum" => Op::Minimum,
            "neg" => Op::Neg,
            "exp" => Op::Exp,
            "log" => Op::Log,
            "sqrt" => Op::Sqrt,
            "square" => Op::Square,
            "tanh" => Op::Tanh,
            "sigmoid" => Op::Sigmoid,
            "relu" => Op::Relu,
            "lgamma" => Op::Lgamma,
            "sum" => Op::Sum,
            "mean" => Op::Mean,
            "matmul" => Op::Matmul,
            "dot" => Op::Dot,
            "transpose" => Op::Transpose,
            "diagPart" => Op::DiagPart,
            "addDiag" => Op::AddDiag,
            "cholesky" => Op::Cholesky,
            "solveGeneral" => Op::SolveGeneral,
            _ => return None,
        })
    }

    pub fn is_leaf(&self) -> bool {
        matches!(self, Op::Leaf | Op::Input | Op::Const)
    }

    /// Every op but the leaves and hand-built nodes is a pure function of its
    /// parents, so two such nodes with equal op and parents can be merged.
    pub fn is_pure(&self) -> bool {
        !self.is_leaf() && !matches!(self, Op::External)
    }

    /// Scratch the op keeps beside its value, for its adjoint.
    pub fn aux_len(&self, parents: &[Shape]) -> usize {
        match self {
            Op::Cholesky => parents[0].size(),
            Op::CholeskyTangent => CHOLESKY_TANGENT_AUX * parents[0].size(),
            Op::TriangularSolve { .. } => parents[1].size(),
            Op::SolveGeneral => {
                let n = parents[0].rows_cols().0;
                n * n + n + parents[1].size()
            }
            _ => 0,
        }
    }

    /// The output shape, or the error the user sees (SPEC §3–§5).
    pub fn infer(&self, p: &[Shape]) -> Result<Shape> {
        let arity = match self {
            Op::Leaf | Op::Input | Op::Const => Some(0),
            Op::External | Op::Concat { .. } => None,
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => Some(2),
            Op::Matmul | Op::Dot | Op::AddDiag | Op::TriangularSolve { .. } | Op::SolveGeneral | Op::CholeskyTangent => Some(2),
            _ => Some(1),
        };
        if let Some(k) = arity {
            if p.len() != k {
                return fail!("{}: takes {} operand{}, got {}", self.name(), k, if k == 1 { "" } else { "s" }, p.len());
            }
        }
        match *self {
            Op::Leaf | Op::Input | Op::Const | Op::External => {
                fail!("{}: a leaf has no shape rule", self.name())
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Maximum | Op::Minimum | Op::Ge | Op::Gt => {
                broadcast(self.name(), p[0], p[1]).map(|(s, _)| s)
            }
            Op::Neg | Op::Exp | Op::Log | Op::Sqrt | Op::Square | Op::Tanh | Op::Sigmoid | Op::Relu | Op::Lgamma | Op::Pow(_) | Op::Digamma => {
                Ok(p[0])
            }
            Op::Sum | Op::Mean => Ok(Shape::Scalar),
            Op::Matmul => {
                let Shape::Matrix(m, k) = p[0] else {
                    return fail!("matmul: left operand must be a matrix, got {}", p[0]);
                };
                match p[1] {
                    Shape::Matrix(k2, n) if k2 == k => Ok(Shape::Matrix(m, n)),
                    Shape::Vector(k2) if k2 == k => Ok(Shape::Vector(m)),
                    Shape::Scalar => fail!("matmul: right operand must be a matrix or vector, got {}", p[1]),
                    _ => fail!("matmul: inner dimensions disagree — {} against {}", p[0], p[1]),
                }
            }
            Op::Dot => match (p[0], p[1]) {
                (Shape::Vector(a), Shape::Vector(b)) if a == b => Ok(Shape::Scalar),
                _ => fail!("dot: needs two vectors of equal length, got {} and {}", p[0], p[1]),
            },
            Op::Transpose => match p[0] {
                Shape::Matrix(m, n) => Ok(Shape::Matrix(n, m)),
                s => fail!("transpose: needs a matrix, got {s}"),
            },
            Op::DiagPart => match p[0].square() {
                Some(n) => Ok(Shape::Vector(n)),
                None => fail!("diagPart: needs a square matrix, got {}", p[0]),
            },
            Op::AddDiag => {
                let Some(n) = p[0].square() else {
                    return fail!("addDiag: needs a square matrix, got {}", p[0]);
                };
                match p[1] {
                    Shape::Scalar => Ok(p[0]),
                    Shape::Vector(k) if k == n => Ok(p[0]),
                    Shape::Vector(k) => fail!("addDiag: diagonal has {k} entries for a {n}×{n} matrix"),
                    s => fail!("addDiag: diagonal must be a scalar or a vector, got {s}"),
                }
            }
            Op::Reshape(to) => {
                if to.checked_size() == Some(p[0].size()) {
                    Ok(to)
                } else {
                    fail!("reshape: cannot view {} elements as {}", p[0].size(), to)
                }
            }
            Op::Slice { start, size } => {
                let dims = p[0].dims();
                if dims.is_empty() {
                    return fail!("slice: cannot slice a scalar");
                }
                for (axis, &d) in dims.iter().enumerate() {
                    if size[axis] == 0 {
                        return fail!("slice: start must be a non-negative integer and size a positive integer");
                    }
                    // Widened, so that the sum is exact.
                    let end = start[axis] as u128 + size[axis] as u128;
                    if end > d as u128 {
                        return fail!("slice: [{}, {}) exceeds axis {} of {}", start[axis], end, axis, p[0]);
                    }
                }
                Ok(match p[0] {
                    Shape::Vector(_) => Shape::Vector(size[0]),
                    _ => Shape::Matrix(size[0], size[1]),
                })
            }
            Op::Concat { axis } => concat_shape(p, axis),
            Op::Cholesky => match p[0].square() {
                Some(_) => Ok(p[0]),
                None => fail!("cholesky: needs a square matrix, got {}", p[0]),
            },
            Op::TriangularSolve { .. } => solve_shape("triangularSolve", p[0], p[1]),
            Op::SolveGeneral => solve_shape("solveGeneral", p[0], p[1]),
            Op::CholeskyTangent => match (p[0].square(), p[1].square()) {
                (Some(a), Some(b)) if a == b => Ok(p[0]),
                _ => fail!("choleskyTangent: needs two square matrices of one order, got {} and {}", p[0], p[1]),
            },
        }
    }
}

/// A slice from its arguments as JavaScript or a plan gives them (an entry
/// that is not a number arrives as NaN), checked against the operand in the
/// order SPEC §4 lists the errors. The bounds are compared as numbers, so an
/// astronomically large start is reported as outside the operand.
pub fn slice_op(operand: Shape, start: &[f64], size: &[f64]) -> Result<Op> {
    let rank = operand.rank();
    if rank == 0 {
        return fail!("slice: cannot slice a scalar");
    }
    if start.len() != rank || size.len() != rank {
        let entries = if rank == 1 { "entry" } else { "entries" };
        return fail!("slice: start and size need {rank} {entries} for a {operand} operand");
    }
    let whole = |x: f64, least: f64| x >= least && x.fract() == 0.0;
    if !start.iter().all(|&x| whole(x, 0.0)) || !size.iter().all(|&x| whole(x, 1.0)) {
        return fail!("slice: start must be a non-negative integer and size a positive integer");
    }
    let dims = operand.dims();
    for axis in 0..rank {
        let end = start[axis] + size[axis];
        if end > dims[axis] as f64 {
            let (s, e) = (js_number(start[axis]), js_number(end));
            return fail!("slice: [{s}, {e}) exceeds axis {axis} of {operand}");
        }
    }
    // Every bound now fits its axis, so the conversions are exact.
    let mut op = Op::Slice { start: [0; 2], size: [0; 2] };
    if let Op::Slice { start: s, size: z } = &mut op {
        for axis in 0..rank {
            s[axis] = start[axis] as usize;
            z[axis] = size[axis] as usize;
        }
    }
    Ok(op)
}

/// The three broadcasting cases of SPEC §3, or the mismatch error.
pub fn broadcast(name: &str, a: Shape, b: Shape) -> Result<(Shape, Broadcast)> {
    match (a, b) {
        _ if a == b => Ok((a, Broadcast::Same)),
        (Shape::Scalar, _) => Ok((b, Broadcast::ScalarLeft)),
        (_, Shape::Scalar) => Ok((a, Broadcast::ScalarRight)),
        (Shape::Vector(d), Shape::Matrix(_, n)) if d == n => Ok((b, Broadcast::RowLeft)),
        (Shape::Matrix(_, n), Shape::Vector(d)) if d == n => Ok((a, Broadcast::RowRight)),
        _ => fail!("{name}: shapes {a} and {b} do not match"),
    }
}

fn solve_shape(name: &str, t: Shape, b: Shape) -> Result<Shape> {
    let Some(n) = t.square() else {
        return fail!("{name}: needs a square matrix, got {t}");
    };
    match b {
        Shape::Scalar => fail!("{name}: right-hand side must be a matrix or vector, got {b}"),
        Shape::Vector(m) | Shape::Matrix(m, _) if m == n => Ok(b),
        _ => fail!("{name}: [{n}×{n}] cannot be applied to {b}"),
    }
}

fn concat_shape(p: &[Shape], axis: u8) -> Result<Shape> {
    let too_large = || fail!("concat: result is too large");
    let Some(&first) = p.first() else {
        return fail!("concat: needs a non-empty array of parts");
    };
    if first.rank() < 2 {
        let mut total = 0usize;
        for &s in p {
            if s.rank() == 2 {
                return fail!("concat: parts must all be scalars and vectors, or all matrices; got {s}");
            }
            let Some(sum) = total.checked_add(s.size()) else { return too_large() };
            total = sum;
        }
        return Ok(Shape::Vector(total));
    }
    if axis > 1 {
        return fail!("concat: axis must be 0 or 1");
    }
    let (mut rows, mut cols) = first.rows_cols();
    for &s in &p[1..] {
        let Shape::Matrix(m, n) = s else {
            return fail!("concat: parts must all be matrices, got {s}");
        };
        let (along, other) = if axis == 0 { (&mut rows, n == cols) } else { (&mut cols, m == rows) };
        if !other {
            return fail!("concat: parts must agree on axis {}, got {} and {}", 1 - axis, first, s);
        }
        let Some(sum) = along.checked_add(if axis == 0 { m } else { n }) else { return too_large() };
        *along = sum;
    }
    Shape::from_dims(&[rows, cols]).map_or_else(too_large, Ok)
}
