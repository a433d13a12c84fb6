//! Everything that can go wrong between a [`KernelInfo`](crate::KernelInfo) and a finished launch.

use cudarc::driver::DriverError;
use gemm_dsl::sass::{SassError, SassMismatch};
use std::fmt;

pub use gemm_dsl::abi::Operand;
use gemm_dsl::abi::{CopyPath, StorageOrder};

/// `; column-major` after the numbers of a column-major operand, so its `ld` reads right.
/// The `copy:` value whose vectors a line of `line_bytes` keeps aligned: the widest that
/// divides it. `cp.async` copies at least 4 bytes, so a line of 16-bit elements with an odd
/// length takes `sync(vector = 2)`.
pub fn narrower_copy(path: CopyPath, line_bytes: u64) -> String {
    let widest = [8, 4, 2]
        .into_iter()
        .find(|&w| line_bytes.is_multiple_of(w))
        .unwrap_or(2);
    match path {
        CopyPath::CpAsync | CopyPath::Tma if widest >= 4 => {
            format!("cp_async(ca, vector = {widest})")
        }
        _ => format!("sync(vector = {widest})"),
    }
}

fn column_major_note(order: StorageOrder) -> &'static str {
    match order {
        StorageOrder::RowMajor => "",
        StorageOrder::ColMajor => "; the operand is column-major",
    }
}

/// What went wrong opening a device, loading a kernel, picking one or launching it.
///
/// Its `Debug` is its `Display` text (as `anyhow`'s errors do), so a `main` that returns
/// `Result<(), Error>` prints the message and its numbers, not a variant's name: Rust prints
/// a failed `main`'s error with `Debug`.
pub enum Error {
    /// No CUDA driver library (`libcuda`) on this machine.
    NoDriver,
    /// A driver call failed; `action` says which call and on what.
    Driver { action: String, source: DriverError },
    /// The driver rejected the PTX; `log` is the JIT compiler's error log.
    Jit {
        kernel: String,
        source: DriverError,
        log: String,
    },
    /// The kernel's description lists other parameters than its PTX declares.
    ParamsMismatch {
        kernel: String,
        declared: String,
        described: String,
    },
    /// Not even one cluster of the kernel fits on a multiprocessor group of the device.
    ClusterDoesNotFit {
        kernel: String,
        cluster: (u32, u32),
        smem_bytes: u32,
    },
    /// The kernel targets a compute capability this device cannot run.
    ArchMismatch {
        kernel: String,
        kernel_cc: u32,
        arch_specific: bool,
        device_cc: u32,
    },
    /// The Rust element type does not match the kernel's element type.
    ElementType {
        kernel: String,
        role: &'static str,
        kernel_type: String,
        kernel_bytes: u32,
        rust_type: &'static str,
        rust_bytes: u32,
    },
    /// The spec's element types are a pair no launcher takes.
    UnsupportedTypes {
        kernel: String,
        dtype: String,
        out: String,
    },
    /// An fp8 kernel given to the run-time-typed loaders ([`crate::AnyKernel`], `Matmul`),
    /// which hold f32, bf16 and f16 kernels.
    Fp8NotDispatched { kernel: String, types: String },
    /// A kernel description's spec text does not parse.
    SpecText { kernel: String, errors: String },
    /// M, N or K is not a size the kernel can compute.
    Dims {
        m: u32,
        n: u32,
        k: u32,
        reason: String,
    },
    /// The problem needs more blocks along a grid axis than the hardware allows.
    GridTooLarge { axis: char, blocks: u32, limit: u32 },
    /// A row stride shorter than the row it must hold.
    LeadingDimTooSmall {
        operand: Operand,
        order: StorageOrder,
        ld: u32,
        row_len: u32,
    },
    /// A buffer shorter than `(rows - 1) * ld + cols` elements.
    BufferTooSmall {
        operand: Operand,
        order: StorageOrder,
        len: usize,
        needed: u64,
        rows: u32,
        cols: u32,
        ld: u32,
    },
    /// A device pointer not aligned to the kernel's vector width.
    MisalignedPointer {
        operand: Operand,
        address: u64,
        align: u32,
    },
    /// A row stride whose byte size is not a multiple of the kernel's vector width, so rows
    /// after the first start misaligned. `copy_path` says which spec change would accept it.
    MisalignedLeadingDim {
        operand: Operand,
        order: StorageOrder,
        ld: u32,
        element_bytes: u32,
        align: u32,
        copy_path: CopyPath,
    },
    /// A batched launch of no products, or of more than one launch takes.
    BatchCount { count: u32, limit: u32 },
    /// A batch stride whose byte size is not a multiple of the kernel's vector width (for
    /// the TMA, of 16 bytes), so the batch's later matrices start misaligned.
    MisalignedBatchStride {
        operand: Operand,
        stride: u64,
        element_bytes: u32,
        align: u32,
    },
    /// C's batch stride is shorter than one C matrix: products would write over each other.
    OverlappingBatch { stride: u64, matrix: u64 },
    /// A buffer shorter than `(count - 1) * stride + matrix` elements.
    BatchBufferTooSmall {
        operand: Operand,
        len: usize,
        needed: u64,
        count: u32,
        stride: u64,
        matrix: u64,
    },
    /// A buffer or stream belongs to another CUDA context than the kernel.
    ContextMismatch { what: String },
    /// Getting the SASS failed (nvdisasm missing or failing).
    Sass(SassError),
    /// The SASS the driver produced breaks a promise of the spec.
    SassMismatch {
        kernel: String,
        mismatch: SassMismatch,
        summary: String,
    },
    /// No built-in kernel set serves these element types on this device.
    NoKernelSet { types: String, device_cc: u32 },
    /// No kernel of a [`Matmul`](crate::Matmul)'s set admits the problem; `refused` says why
    /// each could not.
    NoKernelFor { problem: String, refused: String },
    /// `Matmul::run_strided` got a batch of another count than its problem's.
    BatchMismatch { problem: u32, batch: u32 },
    /// A tuning cache could not be read or written.
    TuneCache { path: String, reason: String },
    /// The fused epilogue's arguments do not match the kernel's spec, or a buffer is too
    /// short or misaligned (see [`crate::epilogue`]).
    EpilogueArguments { kernel: String, problem: String },
    /// A grouped launch's arguments do not fit the kernel (`groups:`), or a buffer is too
    /// short (see [`GemmKernel::launch_grouped`](crate::GemmKernel::launch_grouped)).
    GroupedArguments { kernel: String, problem: String },
    /// A launch on a stream that is capturing a CUDA graph, in a context whose buffers track
    /// their uses with events across streams (cudarc's event tracking, on by default once the
    /// context has a second stream). The events' waits cannot cross a capture: they would
    /// invalidate it. Nothing was launched; the capture goes on. See [`crate::capture`].
    CaptureNeedsUntrackedBuffers { what: String },
    /// A capture asked of the legacy default stream, or a launch on it while another stream
    /// captures: the legacy stream takes no part in a capture. See [`crate::capture`].
    LegacyStreamCapture { what: String },
    /// [`Matmul`](crate::Matmul) would load a kernel (the first run of a problem) on a stream
    /// that is capturing a CUDA graph. Nothing was loaded or launched; the capture goes on.
    CaptureLoadsKernel { kernel: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NoDriver => f.write_str(
                "no CUDA driver found (libcuda could not be loaded); GPU work needs a machine with an NVIDIA driver",
            ),
            Error::Driver { action, source } => {
                write!(f, "{action} failed: {}", describe_driver_error(source))
            }
            Error::Jit { kernel, source, log } => write!(
                f,
                "the driver rejected the PTX of `{kernel}` ({}); JIT log:\n{}",
                describe_driver_error(source),
                if log.trim().is_empty() { "(empty)" } else { log.trim_end() }
            ),
            Error::ParamsMismatch {
                kernel,
                declared,
                described,
            } => write!(
                f,
                "the PTX of `{kernel}` declares the parameters ({declared}), but its description lists ({described})"
            ),
            Error::ClusterDoesNotFit {
                kernel,
                cluster: (x, y),
                smem_bytes,
            } => write!(
                f,
                "`{kernel}` cannot run: the device places no cluster of {x} x {y} tiles' blocks with {smem_bytes} B of shared memory each; use a smaller cluster or fewer stages"
            ),
            Error::ArchMismatch {
                kernel,
                kernel_cc,
                arch_specific,
                device_cc,
            } => {
                let (kernel_arch, device_arch) = (cc_name(*kernel_cc), cc_name(*device_cc));
                if *arch_specific {
                    write!(
                        f,
                        "`{kernel}` is built for {kernel_arch}a, which runs only on compute capability {kernel_arch}; this device is {device_arch}"
                    )
                } else {
                    write!(
                        f,
                        "`{kernel}` needs compute capability {kernel_arch} or newer; this device is {device_arch}"
                    )
                }
            }
            Error::ElementType {
                kernel,
                role,
                kernel_type,
                kernel_bytes,
                rust_type,
                rust_bytes,
            } => write!(
                f,
                "`{kernel}` has {role} elements of type {kernel_type} ({kernel_bytes} B), but was loaded as {rust_type} ({rust_bytes} B)"
            ),
            Error::UnsupportedTypes { kernel, dtype, out } => write!(
                f,
                "`{kernel}` has dtype {dtype} and out {out}; the runtime launches f32 or tf32 -> f32, bf16 -> bf16 or f32, f16 -> f16 or f32, e4m3 or e5m2 -> bf16, f16 or f32, and A and B of two types only as an fp8 pair (e4m3xe5m2, e5m2xe4m3)"
            ),
            Error::Fp8NotDispatched { kernel, types } => write!(
                f,
                "`{kernel}` is an fp8 kernel ({types}): load it with its types, \
                 `GemmKernel::<E4m3, bf16>::load` (gemm_runtime::fp8); the run-time-typed \
                 loaders hold f32, bf16 and f16 kernels"
            ),
            Error::NoKernelSet { types, device_cc } => write!(
                f,
                "no built-in kernel set for {types} on a device of compute capability {}.{}; \
                 give the kernels yourself (Matmul::from_kernels)",
                device_cc / 10,
                device_cc % 10
            ),
            Error::NoKernelFor { problem, refused } => {
                write!(f, "no kernel of the set computes {problem}:\n{refused}")
            }
            Error::TuneCache { path, reason } => write!(f, "tuning cache {path}: {reason}"),
            Error::EpilogueArguments { kernel, problem } => {
                write!(f, "the epilogue arguments of `{kernel}`: {problem}")
            }
            Error::GroupedArguments { kernel, problem } => {
                write!(f, "the grouped launch of `{kernel}`: {problem}")
            }
            Error::BatchMismatch { problem, batch } => write!(
                f,
                "the problem has a batch of {problem} products, but the strides given are for {batch}"
            ),
            Error::SpecText { kernel, errors } => {
                write!(f, "`{kernel}`'s spec text does not parse:\n{errors}")
            }
            Error::Dims { m, n, k, reason } => {
                write!(f, "cannot compute M x N x K = {m} x {n} x {k}: {reason}")
            }
            Error::GridTooLarge {
                axis,
                blocks,
                limit,
            } => write!(
                f,
                "the grid needs {blocks} blocks along {axis}, more than the limit of {limit}"
            ),
            Error::LeadingDimTooSmall {
                operand,
                order,
                ld,
                row_len,
            } => write!(
                f,
                "ld{} = {ld} is shorter than a {} of {operand} ({row_len} elements{})",
                operand.to_string().to_lowercase(),
                order.line(),
                column_major_note(*order)
            ),
            Error::BufferTooSmall {
                operand,
                order,
                len,
                needed,
                rows,
                cols,
                ld,
            } => match order {
                StorageOrder::RowMajor => write!(
                    f,
                    "{operand} holds {len} elements, but {rows} rows x {cols} columns with leading dimension {ld} need {needed} ((rows - 1) * ld + cols)"
                ),
                StorageOrder::ColMajor => write!(
                    f,
                    "{operand} holds {len} elements, but {rows} columns x {cols} rows with leading dimension {ld} need {needed} ((columns - 1) * ld + rows; {operand} is column-major)"
                ),
            },
            Error::MisalignedPointer {
                operand,
                address,
                align,
            } => write!(
                f,
                "{operand} starts at {address:#x}, which is not {align}-byte aligned (off by {} B)",
                address % u64::from(*align)
            ),
            Error::MisalignedLeadingDim {
                operand,
                order,
                ld,
                element_bytes,
                align,
                copy_path,
            } => {
                let name = operand.to_string().to_lowercase();
                let line = order.line();
                let vector = u64::from((align / (*element_bytes).max(1)).max(1));
                let line_bytes = u64::from(*ld) * u64::from(*element_bytes);
                let (what, fix) = match (operand, copy_path) {
                    // C's stores are no wider than the copy vector: a narrower one narrows them.
                    (Operand::C, CopyPath::Tma) => (
                        format!("the kernel stores C in {align}-byte vectors"),
                        format!(
                            "; or use an mma.sync spec with a narrower vector, e.g. `copy: {}`",
                            narrower_copy(CopyPath::CpAsync, line_bytes)
                        ),
                    ),
                    (Operand::C, path) => (
                        format!(
                            "the kernel stores C in {align}-byte vectors, no wider than its copy vector"
                        ),
                        format!(
                            ", or re-specify with `copy: {}`",
                            narrower_copy(*path, line_bytes)
                        ),
                    ),
                    (_, CopyPath::Tma) => (
                        "the TMA needs 16-byte strides".to_string(),
                        format!(
                            "; or use an mma.sync spec with a narrower vector, e.g. `copy: {}`",
                            narrower_copy(CopyPath::CpAsync, line_bytes)
                        ),
                    ),
                    (_, path) => (
                        format!("the kernel copies {align}-byte vectors"),
                        format!(
                            ", or re-specify with `copy: {}`",
                            narrower_copy(*path, line_bytes)
                        ),
                    ),
                };
                write!(
                    f,
                    "ld{name} = {ld} elements = {line_bytes} B is not a multiple of {align} B: {what}, \
                     so every {line} of {operand} must start {align}-byte aligned (a packed {operand} has ld{name} = its {line} length{}); \
                     pad the {line}s to ld{name} = {} (a multiple of {vector} elements) and launch with `launch_with_ld`{fix}",
                    column_major_note(*order),
                    u64::from(*ld).div_ceil(vector) * vector,
                )
            }
            Error::BatchCount { count, limit } => write!(
                f,
                "a batch of {count} products: a batched launch computes 1 to {limit} products (the grid's z limit); split larger batches"
            ),
            Error::MisalignedBatchStride {
                operand,
                stride,
                element_bytes,
                align,
            } => {
                let name = operand.to_string().to_lowercase();
                let vector = u64::from((align / (*element_bytes).max(1)).max(1));
                write!(
                    f,
                    "stride_{name} = {stride} elements = {} B is not a multiple of {align} B: every matrix of {operand} in the batch \
                     must start {align}-byte aligned (the kernel's {align}-byte copies, and the TMA's batch stride); \
                     pad the batch to stride_{name} = {} (a multiple of {vector} elements)",
                    u128::from(*stride) * u128::from(*element_bytes),
                    stride.div_ceil(vector) * vector,
                )
            }
            Error::OverlappingBatch { stride, matrix } => write!(
                f,
                "stride_c = {stride} elements is shorter than one C matrix ({matrix} elements: (rows - 1) * ldc + cols), \
                 so the products would write over each other; use stride_c >= {matrix}"
            ),
            Error::BatchBufferTooSmall {
                operand,
                len,
                needed,
                count,
                stride,
                matrix,
            } => write!(
                f,
                "{operand} holds {len} elements, but {count} matrices {stride} elements apart need {needed} \
                 ((count - 1) * stride_{} + one matrix of {matrix})",
                operand.to_string().to_lowercase()
            ),
            Error::CaptureNeedsUntrackedBuffers { what } => write!(
                f,
                "{what}: the stream is capturing a CUDA graph, and the context tracks buffer uses \
                 with events across its streams (cudarc's event tracking); an event wait cannot \
                 cross a capture and would invalidate it. Call `ctx.disable_event_tracking()` \
                 before allocating the buffers you capture with (and order streams yourself). \
                 Nothing was launched; the capture goes on"
            ),
            Error::LegacyStreamCapture { what } => write!(
                f,
                "{what}: the legacy default stream (`ctx.default_stream()`) takes no part in a \
                 CUDA graph capture: it cannot be captured, and work on it while a blocking stream \
                 captures would invalidate that capture. Capture on a stream of your own \
                 (`ctx.new_stream()`)"
            ),
            Error::CaptureLoadsKernel { kernel } => write!(
                f,
                "the first run of this problem loads `{kernel}` (compiling its PTX, allocating \
                 its workspace), which a CUDA graph capture cannot hold; load it before \
                 capturing: run the problem once, or call `matmul.kernel_for(&problem)`. \
                 Nothing was loaded or launched; the capture goes on"
            ),
            Error::ContextMismatch { what } => write!(
                f,
                "{what} belongs to another CUDA context than the kernel"
            ),
            Error::Sass(error) => write!(f, "SASS check: {error}"),
            Error::SassMismatch {
                kernel,
                mismatch,
                summary,
            } => write!(
                f,
                "the driver's SASS for `{kernel}` breaks the spec's promises: {mismatch}\nopcode counts:\n{summary}"
            ),
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
            Error::Driver { source, .. } | Error::Jit { source, .. } => Some(source),
            Error::Sass(error) => Some(error),
            Error::SassMismatch { mismatch, .. } => Some(mismatch),
            _ => None,
        }
    }
}

impl From<SassError> for Error {
    fn from(error: SassError) -> Self {
        Error::Sass(error)
    }
}

/// `"9.0"` for 90.
fn cc_name(cc: u32) -> String {
    format!("{}.{}", cc / 10, cc % 10)
}

/// The driver's name and description of an error code. Falls back to the enum name when the
/// driver library cannot describe it (e.g. no driver at all).
pub(crate) fn describe_driver_error(error: &DriverError) -> String {
    // Asking the driver for the text loads libcuda, which panics where there is none.
    // SAFETY: `is_culib_present` only tries to open the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return format!("{:?}", error.0);
    }
    match (error.error_name(), error.error_string()) {
        (Ok(name), Ok(text)) => format!("{}: {}", name.to_string_lossy(), text.to_string_lossy()),
        _ => format!("{:?}", error.0),
    }
}

/// Wraps a driver result with what was being attempted.
pub(crate) trait DriverContext<T> {
    fn during(self, action: impl FnOnce() -> String) -> Result<T, Error>;
}

impl<T> DriverContext<T> for Result<T, DriverError> {
    fn during(self, action: impl FnOnce() -> String) -> Result<T, Error> {
        self.map_err(|source| Error::Driver {
            action: action(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_writes_the_message_a_failed_main_shows() {
        // Rust reports `main`'s `Err(error)` as `Error: {error:?}`.
        let errors = [
            Error::NoDriver,
            Error::Driver {
                action: "opening CUDA device 0".to_string(),
                source: DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE),
            },
            Error::GridTooLarge {
                axis: 'y',
                blocks: 70000,
                limit: 65535,
            },
        ];
        for error in errors {
            let debug = format!("{error:?}");
            assert_eq!(debug, error.to_string());
            assert_eq!(format!("{error:#?}"), debug);
        }
        let reported = format!("Error: {:?}", Error::NoDriver);
        assert!(
            reported.starts_with("Error: no CUDA driver found (libcuda could not be loaded)"),
            "{reported}"
        );
    }
}
