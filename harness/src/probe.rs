//! A spec's math-only probe on the GPU: its main-loop instructions with no memory traffic
//! (see `gemm_codegen::emit_math_only`), launched on as many blocks as the real kernel keeps
//! resident, so both fill the device alike.

use crate::error::{DriverContext, Error};
use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use gemm_codegen::MathOnly;
use std::sync::Arc;

/// Dynamic shared memory a kernel gets without opting in.
const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;

/// A loaded math-only probe.
#[derive(Debug)]
pub struct MathOnlyKernel {
    probe: MathOnly,
    ctx: Arc<CudaContext>,
    function: CudaFunction,
}

impl MathOnlyKernel {
    pub fn load(ctx: &Arc<CudaContext>, probe: MathOnly) -> Result<MathOnlyKernel, Error> {
        let name = probe.kernel_name();
        // The runtime's JIT, so a rejected probe reports the driver's log as a kernel does.
        let cubin = gemm_runtime::jit_cubin(ctx, probe.ptx(), name)?;
        let function = ctx
            .load_module(Ptx::from_binary(cubin))
            .and_then(|module| module.load_function(name))
            .during(|| format!("loading `{name}`"))?;
        let smem = probe.dynamic_smem_bytes();
        if smem > DEFAULT_DYNAMIC_SMEM_LIMIT {
            function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
                .during(|| format!("allowing `{name}` {smem} B of dynamic shared memory"))?;
        }
        Ok(MathOnlyKernel {
            probe,
            ctx: ctx.clone(),
            function,
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
        for (what, theirs) in [
            ("the stream", stream.context()),
            ("out", out.stream().context()),
        ] {
            if theirs.cu_ctx() != self.ctx.cu_ctx() {
                return Err(gemm_runtime::Error::ContextMismatch {
                    what: what.to_string(),
                }
                .into());
            }
        }
        let mut launch = stream.launch_builder(&self.function);
        launch.arg(out).arg(&trips);
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (self.probe.threads_per_block(), 1, 1),
            shared_mem_bytes: self.probe.dynamic_smem_bytes(),
        };
        // SAFETY: the probe comes from codegen whole (MathOnly is read-only), so its
        // parameters are (u64 out, u32 trips), as its template writes them, and its block
        // size is the one launched; `out` holds one float per launched thread, and the
        // launch records its use of `out` on the stream.
        unsafe { launch.launch(config) }
            .map(|_| ())
            .during(|| format!("launching `{name}` on {blocks} blocks for {trips} trips"))
    }
}
