//! The driver's PTX compiler, called directly: loading a module with the JIT log captured, and
//! compiling to a cubin that can be disassembled.

use crate::error::{DriverContext, Error};
use crate::jit_cache::{self, NotCached};
use cudarc::driver::sys::{self, CUjitInputType, CUjit_option};
use cudarc::driver::CudaContext;
use gemm_dsl::sass::SassReport;
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::sync::Arc;

/// Bytes kept of each JIT log; driver messages for one kernel are far shorter.
const LOG_BYTES: usize = 64 * 1024;

/// Error and info log buffers handed to the driver as JIT options.
struct JitLogs {
    error: Vec<u8>,
    info: Vec<u8>,
    options: [CUjit_option; 5],
    values: [*mut c_void; 5],
}

impl JitLogs {
    fn new() -> JitLogs {
        // The option values point into the vectors' heap buffers, which stay put however the
        // struct moves.
        let mut logs = JitLogs {
            error: vec![0; LOG_BYTES],
            info: vec![0; LOG_BYTES],
            options: [
                CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
                CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                CUjit_option::CU_JIT_INFO_LOG_BUFFER,
                CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                // The compiler's resource lines and notes (registers, ignored setmaxnreg, ..).
                CUjit_option::CU_JIT_LOG_VERBOSE,
            ],
            values: [std::ptr::null_mut(); 5],
        };
        // Size options travel as integers cast to pointers (the driver's convention).
        logs.values = [
            logs.error.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            logs.info.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            std::ptr::without_provenance_mut(1),
        ];
        logs
    }

    fn count(&self) -> u32 {
        self.options.len() as u32
    }

    /// The error log, then the info log, as text (each up to its first NUL).
    fn text(&self) -> String {
        let as_text = |buffer: &[u8]| {
            let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
            String::from_utf8_lossy(&buffer[..end])
                .trim_end()
                .to_string()
        };
        let (error, info) = (as_text(&self.error), as_text(&self.info));
        match (error.is_empty(), info.is_empty()) {
            (false, false) => format!("{error}\n{info}"),
            (false, true) => error,
            (true, _) => info,
        }
    }
}

/// A kernel or file name for the driver; a NUL inside is an error, as the driver would read
/// only the text before it.
fn name_cstring(name: &str, kernel: &str) -> Result<CString, Error> {
    CString::new(name).map_err(|_| Error::Jit {
        kernel: kernel.to_string(),
        source: cudarc::driver::DriverError(sys::CUresult::CUDA_ERROR_NOT_FOUND),
        log: "the kernel name contains a NUL byte".to_string(),
    })
}

fn ptx_cstring(ptx: &str, kernel: &str) -> Result<CString, Error> {
    CString::new(ptx).map_err(|_| Error::Jit {
        kernel: kernel.to_string(),
        source: cudarc::driver::DriverError(sys::CUresult::CUDA_ERROR_INVALID_PTX),
        log: "the PTX text contains a NUL byte".to_string(),
    })
}

/// A module the driver compiled from PTX, unloaded on drop.
#[derive(Debug)]
pub(crate) struct Module {
    ctx: Arc<CudaContext>,
    handle: sys::CUmodule,
}

// SAFETY: a CUmodule is a driver handle valid in every thread that binds its context, which
// every use here does first; the driver serializes module operations itself.
unsafe impl Send for Module {}
unsafe impl Sync for Module {}

impl Module {
    /// Compiles and loads PTX with `cuModuleLoadDataEx`, so a rejection carries the JIT log.
    pub(crate) fn load(ctx: &Arc<CudaContext>, ptx: &str, kernel: &str) -> Result<Module, Error> {
        ctx.bind_to_thread()
            .during(|| "binding the CUDA context".to_string())?;
        let source = ptx_cstring(ptx, kernel)?;
        let mut logs = JitLogs::new();
        let mut handle: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `source` is NUL-terminated; the option arrays and the buffers they point to
        // live in `logs` until after the call.
        let status = unsafe {
            sys::cuModuleLoadDataEx(
                &mut handle,
                source.as_ptr().cast(),
                logs.count(),
                logs.options.as_mut_ptr(),
                logs.values.as_mut_ptr(),
            )
        };
        status.result().map_err(|error| Error::Jit {
            kernel: kernel.to_string(),
            source: error,
            log: logs.text(),
        })?;
        Ok(Module {
            ctx: ctx.clone(),
            handle,
        })
    }

    /// The kernel entry `name`.
    pub(crate) fn function(&self, name: &str) -> Result<sys::CUfunction, Error> {
        let name_c = name_cstring(name, name)?;
        let mut function: sys::CUfunction = std::ptr::null_mut();
        self.ctx
            .bind_to_thread()
            .during(|| "binding the CUDA context".to_string())?;
        // SAFETY: the module handle is live (owned by self); `name_c` is NUL-terminated.
        unsafe { sys::cuModuleGetFunction(&mut function, self.handle, name_c.as_ptr()) }
            .result()
            .during(|| format!("looking up the entry `{name}` in its module"))?;
        Ok(function)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // Errors here have no caller to go to; the context records them for the next call.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: the handle came from cuModuleLoadDataEx and is unloaded exactly once.
        self.ctx
            .record_err(unsafe { sys::cuModuleUnload(self.handle) }.result());
    }
}

/// Destroys a link state on every exit path.
struct LinkState(sys::CUlinkState);

impl Drop for LinkState {
    fn drop(&mut self) {
        // SAFETY: created by cuLinkCreate_v2 and destroyed exactly once; nothing borrowed
        // from it (the cubin) outlives this guard.
        let _ = unsafe { sys::cuLinkDestroy(self.0) };
    }
}

/// Where the machine code of a [`DriverCubin`] was read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SassOrigin {
    /// The cubin `cuModuleLoadDataEx` compiled for a module load, the code that runs, read
    /// from this file of the driver's JIT cache.
    LoadedModule { cache_entry: PathBuf },
    /// A copy compiled for linking ([`jit_cubin`]), as the loaded code was not in the JIT
    /// cache (why not). It differs from the loaded code where the kernel moves registers
    /// between warpgroups: linking drops `setmaxnreg`.
    LinkedCopy { why_not_loaded: String },
}

impl std::fmt::Display for SassOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SassOrigin::LoadedModule { cache_entry } => write!(
                f,
                "the loaded module's code (JIT cache entry {})",
                cache_entry.display()
            ),
            SassOrigin::LinkedCopy { why_not_loaded } => write!(
                f,
                "a copy compiled for linking, not the loaded code: {why_not_loaded}"
            ),
        }
    }
}

/// The machine code the driver makes of a kernel's PTX, and where it was read.
#[derive(Clone, Debug)]
pub struct DriverCubin {
    pub cubin: Vec<u8>,
    pub origin: SassOrigin,
    /// The JIT's log of the linked copy (empty for the loaded module's code, and where the
    /// driver took the copy from its cache).
    pub log: String,
}

/// A kernel's SASS ([`GemmKernel::sass`](crate::GemmKernel::sass)) and where it was read.
#[derive(Clone, Debug)]
pub struct DriverSass {
    pub report: SassReport,
    pub origin: SassOrigin,
}

/// The machine code a module load of `ptx` runs on the context's device: loads it (as
/// [`GemmKernel::load`](crate::GemmKernel::load) does), then reads the cubin the driver made
/// from its JIT cache, or compiles a linked copy where the cache does not hold it.
pub fn driver_cubin(ctx: &Arc<CudaContext>, ptx: &str, kernel: &str) -> Result<DriverCubin, Error> {
    let _module = Module::load(ctx, ptx, kernel)?;
    let (major, minor) = ctx
        .compute_capability()
        .during(|| "reading the device's compute capability".to_string())?;
    loaded_or_linked_cubin(ctx, ptx, kernel, (major * 10 + minor) as u32)
}

/// The cubin of a module already loaded from `ptx`, from the JIT cache, else a linked copy.
pub(crate) fn loaded_or_linked_cubin(
    ctx: &Arc<CudaContext>,
    ptx: &str,
    kernel: &str,
    device_cc: u32,
) -> Result<DriverCubin, Error> {
    match jit_cache::loaded_cubin(ptx, device_cc) {
        Ok(found) => Ok(DriverCubin {
            cubin: found.cubin,
            origin: SassOrigin::LoadedModule {
                cache_entry: found.entry,
            },
            log: String::new(),
        }),
        Err(NotCached(why_not_loaded)) => {
            let (cubin, log) = jit_cubin_logged(ctx, ptx, kernel)?;
            Ok(DriverCubin {
                cubin,
                origin: SassOrigin::LinkedCopy { why_not_loaded },
                log,
            })
        }
    }
}

/// Compiles PTX with the driver's JIT for the context's device and returns the cubin. Not
/// always the machine code `cuModuleLoadDataEx` runs: this `cuLink` route compiles for
/// linking, which drops `setmaxnreg` (the JIT's note C7504, no `USETMAXREG` in the SASS) where
/// `cuModuleLoadDataEx` keeps it; [`driver_cubin`] reads the loaded code.
pub fn jit_cubin(ctx: &Arc<CudaContext>, ptx: &str, kernel: &str) -> Result<Vec<u8>, Error> {
    jit_cubin_logged(ctx, ptx, kernel).map(|(cubin, _)| cubin)
}

/// [`jit_cubin`], with the JIT's log (its resource lines and notes, as `ptxas -v` prints them).
pub fn jit_cubin_logged(
    ctx: &Arc<CudaContext>,
    ptx: &str,
    kernel: &str,
) -> Result<(Vec<u8>, String), Error> {
    ctx.bind_to_thread()
        .during(|| "binding the CUDA context".to_string())?;
    let source = ptx_cstring(ptx, kernel)?;
    let name = name_cstring(&format!("{kernel}.ptx"), kernel)?;
    let mut logs = JitLogs::new();
    let mut state: sys::CUlinkState = std::ptr::null_mut();
    let jit_error = |logs: &JitLogs, error| Error::Jit {
        kernel: kernel.to_string(),
        source: error,
        log: logs.text(),
    };
    // SAFETY: the option arrays and log buffers live in `logs`, which outlives the link state
    // (declared before the guard, so dropped after it).
    unsafe {
        sys::cuLinkCreate_v2(
            logs.count(),
            logs.options.as_mut_ptr(),
            logs.values.as_mut_ptr(),
            &mut state,
        )
    }
    .result()
    .during(|| format!("creating a JIT link state for `{kernel}`"))?;
    let state = LinkState(state);
    let bytes = source.as_bytes_with_nul();
    // SAFETY: `bytes` is NUL-terminated PTX of the given size; the driver copies it.
    unsafe {
        sys::cuLinkAddData_v2(
            state.0,
            CUjitInputType::CU_JIT_INPUT_PTX,
            bytes.as_ptr() as *mut c_void,
            bytes.len(),
            name.as_ptr(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(|error| jit_error(&logs, error))?;
    let mut cubin: *mut c_void = std::ptr::null_mut();
    let mut cubin_bytes: usize = 0;
    // SAFETY: out-pointers are valid locals.
    unsafe { sys::cuLinkComplete(state.0, &mut cubin, &mut cubin_bytes) }
        .result()
        .map_err(|error| jit_error(&logs, error))?;
    // SAFETY: the driver owns `cubin_bytes` bytes at `cubin` until cuLinkDestroy; they are
    // copied out before the guard drops.
    let copy = unsafe { std::slice::from_raw_parts(cubin.cast::<u8>(), cubin_bytes) }.to_vec();
    drop(state);
    Ok((copy, logs.text()))
}
