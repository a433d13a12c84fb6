//! What can go wrong measuring a kernel: the runtime's errors (loading, launching, driver
//! calls), and the references', baselines' and timings' own.

use cudarc::cublas::result::CublasError;
use cudarc::driver::DriverError;
use gemm_dsl::sass::SassError;
use std::fmt;

/// A harness error: a runtime error, or one of a reference, a baseline or a timing.
///
/// Its `Debug` is its `Display` text, as the runtime's [`gemm_runtime::Error`]'s is.
pub enum Error {
    /// Loading or launching a kernel, or a driver call.
    Runtime(gemm_runtime::Error),
    /// A cuBLAS call failed.
    Cublas { action: String, source: CublasError },
    /// The cuBLAS library (`libcublas`, with its `libcublasLt`) could not be loaded.
    NoCublas,
    /// A baseline library other than cuBLAS (cuBLASLt, NVRTC) failed.
    Baseline { action: String, reason: String },
    /// A matrix that should be packed `rows x cols` (a [`Problem`](crate::verify::Problem)'s
    /// A or B, a reference result) holding another number of elements.
    PackedSize {
        what: &'static str,
        len: usize,
        rows: u32,
        cols: u32,
    },
    /// A math-only probe launch with no work or too small an output buffer.
    ProbeLaunch { kernel: String, reason: String },
    /// A benchmark could not take its times as its method says.
    Timing(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Runtime(error) => fmt::Display::fmt(error, f),
            Error::Cublas { action, source } => write!(f, "{action} failed: {source:?}"),
            Error::NoCublas => write!(
                f,
                "no cuBLAS found ({CUBLAS_LIBRARY} could not be loaded); install it (CUDA toolkit, \
                 or the nvidia-cublas wheel) and add its folder to {LIBRARY_PATH_VARIABLE}"
            ),
            Error::Baseline { action, reason } => write!(f, "{action} failed: {reason}"),
            Error::PackedSize {
                what,
                len,
                rows,
                cols,
            } => write!(
                f,
                "{what} holds {len} elements, but a packed {rows} x {cols} matrix has {}",
                u64::from(*rows) * u64::from(*cols)
            ),
            Error::ProbeLaunch { kernel, reason } => {
                write!(f, "cannot launch `{kernel}`: {reason}")
            }
            Error::Timing(reason) => write!(f, "timing failed: {reason}"),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            // The runtime's error stands in for this one: its message is this one's.
            Error::Runtime(error) => error.source(),
            Error::Cublas { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<gemm_runtime::Error> for Error {
    fn from(error: gemm_runtime::Error) -> Self {
        Error::Runtime(error)
    }
}

impl From<SassError> for Error {
    fn from(error: SassError) -> Self {
        Error::Runtime(error.into())
    }
}

/// The library file cuBLAS calls load, as the loader looks for it.
#[cfg(windows)]
const CUBLAS_LIBRARY: &str = "cublas64_*.dll";
#[cfg(not(windows))]
const CUBLAS_LIBRARY: &str = "libcublas.so";

/// Where the loader looks for libraries besides the system's folders.
#[cfg(windows)]
const LIBRARY_PATH_VARIABLE: &str = "PATH";
#[cfg(not(windows))]
const LIBRARY_PATH_VARIABLE: &str = "LD_LIBRARY_PATH";

/// Wraps a driver result with what was being attempted, as the runtime's driver errors are.
pub(crate) trait DriverContext<T> {
    fn during(self, action: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> DriverContext<T> for Result<T, DriverError> {
    fn during(self, action: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|source| {
            Error::Runtime(gemm_runtime::Error::Driver {
                action: action(),
                source,
            })
        })
    }
}
