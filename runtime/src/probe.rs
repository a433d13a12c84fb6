//! A spec's math-only probe on the GPU: its main-loop instructions with no memory traffic
//! (see `gemm_codegen::emit_math_only`), launched on as many blocks as the real kernel keeps
//! resident, so both fill the device alike.

use crate::error::{DriverContext, Error};
use crate::jit::Module;
use crate::kernel::{allow_dynamic_smem, launch_raw, same_context, LaunchDims};
use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtrMut};
use gemm_codegen::MathOnly;
use std::ffi::c_void;
use std::sync::Arc;

/// A loaded math-only probe.
#[derive(Debug)]
pub struct MathOnlyKernel {
    probe: MathOnly,
    ctx: Arc<CudaContext>,
    function: sys::CUfunction,
    /// Owns the code `function` points into.
    _module: Module,
}

// SAFETY: as for GemmKernel: `function` lives as long as `_module`, and every call binds the
// context first.
unsafe impl Send for MathOnlyKernel {}
unsafe impl Sync for MathOnlyKernel {}

impl MathOnlyKernel {
    pub fn load(ctx: &Arc<CudaContext>, probe: MathOnly) -> Result<MathOnlyKernel, Error> {
        let module = Module::load(ctx, probe.ptx(), probe.kernel_name())?;
        let function = module.function(probe.kernel_name())?;
        allow_dynamic_smem(function, probe.dynamic_smem_bytes(), probe.kernel_name())?;
        Ok(MathOnlyKernel {
            probe,
            ctx: ctx.clone(),
            function,
            _module: module,
        })
    }

    pub fn name(&self) -> &str {
        self.probe.kernel_name()
    }

    /// Flops of one launch of `blocks` blocks running `trips` trips each.
    pub fn flops(&self, blocks: u32, trips: u32) -> f64 {
        self.probe.flops_per_trip() as f64 * f64::from(blocks) * f64::from(trips)
    }

    /// Floats `out` must hold for a launch of `blocks` blocks: one per thread.
    pub fn out_len(&self, blocks: u32) -> usize {
        blocks as usize * self.probe.threads_per_block() as usize
    }

    /// `blocks` blocks, `trips` k tiles of math each (at least one).
    pub fn launch(
        &self,
        stream: &CudaStream,
        blocks: u32,
        trips: u32,
        out: &mut CudaSlice<f32>,
    ) -> Result<(), Error> {
        let name = self.name();
        if blocks == 0 || trips == 0 {
            return Err(Error::ProbeLaunch {
                kernel: name.to_string(),
                reason: format!("blocks ({blocks}) and trips ({trips}) must both be at least 1"),
            });
        }
        if out.len() < self.out_len(blocks) {
            return Err(Error::ProbeLaunch {
                kernel: name.to_string(),
                reason: format!(
                    "out holds {} floats, {blocks} blocks write {}",
                    out.len(),
                    self.out_len(blocks)
                ),
            });
        }
        same_context(
            &self.ctx,
            [
                ("the stream", stream.context()),
                ("out", out.stream().context()),
            ],
        )?;
        let (out_ptr, _guard) = out.device_ptr_mut(stream);
        let mut out_arg: u64 = out_ptr;
        let mut trips_arg = trips;
        let mut params: [*mut c_void; 2] = [
            (&mut out_arg as *mut u64).cast(),
            (&mut trips_arg as *mut u32).cast(),
        ];
        // SAFETY: the probe comes from codegen whole (MathOnly is read-only), so its
        // parameters are (u64 out, u32 trips), as its template writes them, and its block
        // size is the one launched; `out` holds one float per launched thread and stays
        // borrowed until the guard records the launch.
        unsafe {
            launch_raw(
                &self.ctx,
                self.function,
                LaunchDims {
                    grid: (blocks, 1, 1),
                    cluster: (1, 1),
                    threads: self.probe.threads_per_block(),
                    dynamic_smem_bytes: self.probe.dynamic_smem_bytes(),
                    cooperative: false,
                },
                stream,
                &mut params,
            )
        }
        .during(|| format!("launching `{name}` on {blocks} blocks for {trips} trips"))
    }
}
