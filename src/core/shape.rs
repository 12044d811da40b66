//! Shapes of rank 0, 1 or 2, and how they print in messages.

use std::fmt;

/// A scalar `[]`, a vector `[n]` or a row-major matrix `[m, n]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    Scalar,
    Vector(usize),
    Matrix(usize, usize),
}

/// No single value may hold more elements than this (2^28 f64, 2 GiB): a
/// hostile shape is refused before anything is allocated.
pub const MAX_ELEMENTS: usize = 1 << 28;

impl Shape {
    pub fn rank(self) -> usize {
        match self {
            Shape::Scalar => 0,
            Shape::Vector(_) => 1,
            Shape::Matrix(..) => 2,
        }
    }

    /// The number of elements, `None` when it does not fit a `usize`.
    pub fn checked_size(self) -> Option<usize> {
        match self {
            Shape::Scalar => Some(1),
            Shape::Vector(n) => Some(n),
            Shape::Matrix(m, n) => m.checked_mul(n),
        }
    }

    /// The number of elements of a shape a value has, which is at most
    /// `MAX_ELEMENTS`. Saturates for any other shape, so that a size check
    /// still refuses it; where a shape is not yet checked, use `checked_size`.
    pub fn size(self) -> usize {
        self.checked_size().unwrap_or(usize::MAX)
    }

    /// The dimensions as a list, `[]`, `[n]` or `[m, n]`.
    pub fn dims(self) -> Vec<usize> {
        match self {
            Shape::Scalar => vec![],
            Shape::Vector(n) => vec![n],
            Shape::Matrix(m, n) => vec![m, n],
        }
    }

    /// Rows and columns, a vector counting as one row.
    pub fn rows_cols(self) -> (usize, usize) {
        match self {
            Shape::Scalar => (1, 1),
            Shape::Vector(n) => (1, n),
            Shape::Matrix(m, n) => (m, n),
        }
    }

    /// The square size of a matrix, if it is one.
    pub fn square(self) -> Option<usize> {
        match self {
            Shape::Matrix(m, n) if m == n => Some(n),
            _ => None,
        }
    }

    /// Build a shape from dimensions, refusing more than two axes and sizes
    /// beyond `MAX_ELEMENTS`.
    pub fn from_dims(dims: &[usize]) -> Option<Shape> {
        let shape = match *dims {
            [] => Shape::Scalar,
            [n] => Shape::Vector(n),
            [m, n] => Shape::Matrix(m, n),
            _ => return None,
        };
        (shape.checked_size()? <= MAX_ELEMENTS).then_some(shape)
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Scalar => f.write_str("scalar"),
            Shape::Vector(n) => write!(f, "[{n}]"),
            Shape::Matrix(m, n) => write!(f, "[{m}×{n}]"),
        }
    }
}
