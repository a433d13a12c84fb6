//! A generated kernel loaded on a device, with checked launches.

use crate::capture::check_capture_of;
use crate::check::{
    check_arch, check_grouped_launch, check_launch, grouped_walk_rows, Batch, GroupedArgs,
    GroupedDims, LaunchArgs, LeadingDims, OperandArg,
};
use crate::element::{spec_types, stores, Element};
use crate::epilogue::{check_arguments, check_quant_scales, BiasValues, CIn, Epilogue, FusedSpec};
use crate::error::{DriverContext, Error};
use crate::jit::{loaded_or_linked_cubin, DriverSass, Module, SassOrigin};
use crate::tensor_map::{GlobalMatrix, TensorMap, TensorMapCache};
use cudarc::driver::sys::{self, CUfunction_attribute};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
#[cfg(feature = "emit")]
use gemm_codegen::Emitted;
use gemm_dsl::abi::{
    EpilogueBuffer, Factor, KernelInfo, LaunchShape, Opcode, Operand, ParamKind, SassCheck, Scalar,
};
use gemm_dsl::sass::{self, PtxasResources, SassMismatch, SassReport, SassViolation};
use gemm_dsl::DType;
#[cfg(feature = "emit")]
use std::collections::HashMap;
use std::collections::HashSet;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, Once, OnceLock};

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;

/// A GEMM kernel compiled by the driver for one context, launched with checked arguments.
///
/// `In` is the element type of A and B, `Out` of C; both must match the kernel's spec. `InB`
/// is B's where the spec's `b_dtype` pairs two fp8 types (`GemmKernel<E4m3, bf16, E5m2>`).
pub struct GemmKernel<In, Out, InB = In> {
    info: KernelInfo<'static>,
    ctx: Arc<CudaContext>,
    function: sys::CUfunction,
    /// Owns the code `function` points into; unloaded after the kernel is dropped.
    module: Module,
    /// Blocks of this kernel the device holds at once: a persistent grid's size.
    resident_blocks: u32,
    /// A stream-K kernel's global workspace (partial sums and flags), sized for its largest
    /// grid. Launches take turns with it: each holds the lock while it enqueues, and the
    /// slice's events make a launch on another stream wait for the one before.
    workspace: Option<Mutex<CudaSlice<u8>>>,
    /// What the spec fuses into the epilogue, which [`GemmKernel::launch_fused`]'s
    /// arguments must match.
    fused: FusedSpec,
    /// A whole-tile persistent walk spread evenly over the blocks
    /// ([`GemmKernel::balance_grid`]).
    balanced_grid: bool,
    /// The tensor maps of earlier launches, encoded again only for new buffers or sizes.
    tensor_maps: TensorMapCache,
    elements: PhantomData<fn(In, InB) -> Out>,
}

// SAFETY: `function` is a handle into `module`, which lives as long as the kernel; driver
// handles may be used from any thread that binds the context, which every call does.
unsafe impl<In, Out, InB> Send for GemmKernel<In, Out, InB> {}
unsafe impl<In, Out, InB> Sync for GemmKernel<In, Out, InB> {}

impl<In, Out, InB> std::fmt::Debug for GemmKernel<In, Out, InB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GemmKernel")
            .field("name", &self.info.name())
            .field("launch", &self.info.launch())
            .field("module", &self.module)
            .finish()
    }
}

impl<In: Element, Out: Element, InB: Element> GemmKernel<In, Out, InB> {
    /// Compiles the kernel's PTX for the context's device and prepares it for launches.
    ///
    /// Checks the element types, the parameter list and the device's compute capability
    /// first. The rest of `info` (launch shape, memory footprint) is trusted: a `KernelInfo`
    /// comes from codegen, or from the `unsafe` [`KernelInfo::from_parts`] whose caller
    /// vouches for it. In debug builds, also checks the driver's SASS against the spec's promises
    /// (once per kernel and device per process; see [`GemmKernel::sass`]).
    pub fn load(ctx: &Arc<CudaContext>, info: &KernelInfo<'static>) -> Result<Self, Error> {
        check_params(info)?;
        let (dtype, b_dtype, out) = spec_types(info)?;
        let fused = FusedSpec::of_info(info)?;
        check_element::<In>(info, "input", dtype, info.launch().input_element_bytes)?;
        check_element::<InB>(info, "B input", b_dtype, info.launch().input_element_bytes)?;
        check_element::<Out>(info, "output", out, info.launch().output_element_bytes)?;
        let device_cc = device_compute_capability(ctx)?;
        check_arch(info.name(), info.launch(), device_cc)?;

        let module = Module::load(ctx, info.ptx(), info.name())?;
        let function = module.function(info.name())?;
        allow_dynamic_smem(function, info.launch().dynamic_smem_bytes, info.name())?;
        let resident_blocks = resident_blocks(ctx, function, info)?;
        let workspace = workspace(ctx, info, resident_blocks)?;
        let kernel = GemmKernel {
            info: *info,
            ctx: ctx.clone(),
            function,
            module,
            resident_blocks,
            workspace,
            fused,
            balanced_grid: true,
            tensor_maps: TensorMapCache::new(),
            elements: PhantomData,
        };
        if cfg!(debug_assertions) {
            kernel.check_sass_once(device_cc)?;
        }
        Ok(kernel)
    }

    /// Loads a kernel emitted at run time (tests, benchmarks). The emitted text is interned
    /// for the life of the process, so loading the same kernel again costs no memory.
    #[cfg(feature = "emit")]
    pub fn from_emitted(ctx: &Arc<CudaContext>, emitted: &Emitted) -> Result<Self, Error> {
        Self::load(ctx, &intern(emitted))
    }

    pub fn info(&self) -> &KernelInfo<'static> {
        &self.info
    }

    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Registers per thread of the loaded function, as the driver compiled it (for a kernel
    /// that moves registers between warpgroups with `setmaxnreg`, its `.maxnreg` cap).
    pub fn registers(&self) -> Result<u32, Error> {
        self.function_attribute(
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
            "register count",
        )
    }

    /// One of the loaded function's attributes; `what` names it in the error.
    fn function_attribute(
        &self,
        attribute: CUfunction_attribute,
        what: &str,
    ) -> Result<u32, Error> {
        let mut value: std::ffi::c_int = 0;
        self.ctx
            .bind_to_thread()
            .during(|| "binding the CUDA context".to_string())?;
        // SAFETY: `function` is a live handle of `module`; the call writes one int.
        unsafe { sys::cuFuncGetAttribute(&mut value, attribute, self.function) }
            .result()
            .during(|| format!("reading the {what} of `{}`", self.info.name()))?;
        Ok(u32::try_from(value).unwrap_or(0))
    }

    /// Blocks of this kernel the device runs at once (multiprocessors times blocks per
    /// multiprocessor, as the driver's occupancy calculator says): the grid of a persistent
    /// schedule.
    pub fn resident_blocks(&self) -> u32 {
        self.resident_blocks
    }

    /// Whether a persistent walk of whole tiles is spread evenly from now on: the rounds of
    /// tiles the device's blocks need, on as few blocks as take that many rounds
    /// ([`LaunchShape::grid_batched`], the default and what the cost model prices), or
    /// launched on every block the device holds ([`LaunchShape::full_grid_batched`], to
    /// compare). Stream-K walks keep every block either way.
    ///
    /// [`LaunchShape::grid_batched`]: gemm_dsl::abi::LaunchShape::grid_batched
    /// [`LaunchShape::full_grid_batched`]: gemm_dsl::abi::LaunchShape::full_grid_batched
    pub fn balance_grid(&mut self, on: bool) {
        self.balanced_grid = on;
    }

    /// Caps a persistent kernel's grid at `blocks`, rounded down to whole clusters (one cluster
    /// at least), below the blocks the device holds at once: to measure whether a smaller grid
    /// runs faster (a lighter power draw, whole waves of tiles). A one-tile-per-block kernel's
    /// grid follows the problem and ignores it. Returns the grid's size from now on.
    pub fn limit_grid(&mut self, blocks: u32) -> u32 {
        let (x, y) = self.info.launch().cluster_dims();
        self.resident_blocks = limited_grid(self.resident_blocks, blocks, x * y);
        self.resident_blocks
    }

    /// `C = A·B` with packed operands in the spec's layout (row-major: `lda = k`, `ldb = n`;
    /// column-major A: `lda = m`; column-major B: `ldb = k`; C row-major, `ldc = n`).
    ///
    /// Operands are [`CudaSlice`](cudarc::driver::CudaSlice)s or views of them (`slice.slice(..)`), whose start need
    /// not be the allocation's, so alignment is checked too.
    #[allow(clippy::too_many_arguments)]
    pub fn launch<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        m: u32,
        n: u32,
        k: u32,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        let LeadingDims { lda, ldb, ldc } = LeadingDims::packed(self.info.launch(), m, n, k);
        self.launch_with_ld(stream, a, b, c, m, n, k, lda, ldb, ldc)
    }

    /// `C = A·B` with leading dimensions in elements: the stride between rows, or between
    /// columns of an operand the spec's `layout` makes column-major (`lda >= M` for a
    /// column-major A, `ldb >= K` for a column-major B). Sizes, strides, buffer lengths and
    /// alignment are checked before anything reaches the GPU.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_with_ld<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        m: u32,
        n: u32,
        k: u32,
        lda: u32,
        ldb: u32,
        ldc: u32,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        let lds = LeadingDims { lda, ldb, ldc };
        self.launch_strided_batched(stream, a, b, c, m, n, k, lds, Batch::ONE)
    }

    /// `batch.count` products `C_i = A_i·B_i` in one launch (a strided batch, like cuBLAS's
    /// `GemmStridedBatched`): matrix `i` of each operand starts `i · stride` elements into
    /// its buffer, each laid out with the leading dimensions `lds` (as in
    /// [`GemmKernel::launch_with_ld`]). A stride of 0 shares one A or one B among all
    /// products; [`Batch::packed`] gives matrices back to back.
    ///
    /// Checked before anything reaches the GPU, besides what `launch_with_ld` checks: 1 to
    /// [`MAX_BATCH`](crate::check::MAX_BATCH) products, C's matrices at least one matrix
    /// apart (no overlap), every buffer long enough for its last matrix, and every stride's
    /// byte size a multiple of its operand's alignment (A and B: the copy vector; C: the
    /// store width; 16 B for the TMA).
    /// Each kernel runs the batch in one grid (z for one tile per block; a persistent grid
    /// walks every product's tiles).
    ///
    /// A stream-K kernel (`tail = stream_k`) uses the workspace it allocated at load; its
    /// launches take turns with it whatever their streams. Its blocks wait for one another,
    /// so its grid (sized to the device) must be resident at once: it is launched
    /// cooperatively, and the driver starts it only when the whole grid fits beside whatever
    /// else runs.
    #[allow(clippy::too_many_arguments)]
    pub fn launch_strided_batched<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        m: u32,
        n: u32,
        k: u32,
        lds: LeadingDims,
        batch: Batch,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        let mut plain = Epilogue::none();
        self.launch_fused(stream, a, b, c, m, n, k, lds, batch, &mut plain)
    }

    /// [`GemmKernel::launch_strided_batched`] with the arguments of the spec's fused
    /// epilogue, `D = act(α·A·B + β·C + bias)` (keys `scale`, `bias`, `activation`): D is
    /// `c`; C-in, where the spec reads it (`scale: alpha_beta`), is a buffer laid out as C
    /// (C's leading dimension and batch stride) or C itself ([`CIn::Output`]); the bias holds
    /// M (`row`) or N (`col`) elements per product. Each argument the spec reads must be given
    /// and none it ignores (α must be 1 and β 0 without them), the bias of the spec's type:
    /// checked, with C-in's buffer under C's rules, before anything reaches the GPU.
    ///
    /// Every launch may be captured in a CUDA graph on a stream of one's own; on a capturing
    /// stream it is refused while the context tracks buffer uses with events (see
    /// [`crate::capture`]).
    ///
    /// [`CIn::Output`]: crate::epilogue::CIn::Output
    #[allow(clippy::too_many_arguments)]
    pub fn launch_fused<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        m: u32,
        n: u32,
        k: u32,
        lds: LeadingDims,
        batch: Batch,
        epilogue: &mut Epilogue<'_, Out>,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        self.launch_any(stream, a, b, c, (m, n, k), lds, batch, epilogue, None)
    }

    /// A grouped product (`groups:` kernels, for mixture-of-experts layers), in one launch:
    /// expert `g`'s rows of A times its own B into the same rows of `c` (D). `group_rows`
    /// holds an int32 per expert, read only by the kernel: `groups: contiguous`, the end of
    /// expert `g`'s rows (a prefix sum, as `torch._grouped_mm`'s `offs`; A is
    /// `dims.rows x K`, each expert's rows after the last's); `groups: masked`, expert `g`'s
    /// count of rows (A is `dims.groups x capacity x K`, `dims.rows = groups x capacity`,
    /// expert `g`'s rows the first of its own `capacity`). B holds `dims.groups` matrices
    /// back to back, each laid out as the spec's layout says (`rc`: `N x K`, as `nn.Linear`
    /// stores weights, `ldb >= K`; `rr`: `K x N`). D's rows that belong to no expert, and a
    /// masked expert's rows past its count, are not written.
    ///
    /// Checked before the launch: the sizes, the leading dimensions, every buffer's length
    /// (B's for all its experts, the table's for one entry per expert), 1 to
    /// [`MAX_GROUPS`](gemm_dsl::grouped::MAX_GROUPS) experts. The table's values are not read
    /// on the host (no synchronization): the kernel clamps them, as
    /// [`GroupRows`](gemm_dsl::grouped::GroupRows) says: an entry below the one before makes
    /// its expert empty, a negative one counts as 0, one past the rows stops at them, a count
    /// over the capacity is the capacity, so whatever the table holds, nothing is written
    /// outside D's rows or into another expert's. Capturable in a CUDA graph as every launch
    /// (the table is read when the graph replays). A kernel with a fused epilogue or fp8 block
    /// scales takes their arguments through [`GemmKernel::launch_grouped_with`].
    #[allow(clippy::too_many_arguments)]
    pub fn launch_grouped<A, B, C, R>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        group_rows: &R,
        dims: GroupedDims,
        lds: LeadingDims,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
        R: DevicePtr<i32>,
    {
        let mut plain = Epilogue::none();
        self.launch_grouped_with(stream, a, b, c, group_rows, dims, lds, &mut plain)
    }

    /// [`GemmKernel::launch_grouped`] with the epilogue's arguments. The fused epilogue's
    /// apply per expert: α; a column bias of each expert ([`BiasArg::strided`] by its stride,
    /// `(G - 1) · stride + N` elements; 0 shares one); the rows' factors
    /// ([`Epilogue::row_scale`]), one per row of A, `dims.rows` of them; C-in and the aux
    /// output laid out as D. A grouped fp8 kernel's block scales (`quant: block`,
    /// [`Epilogue::quant_scales`]): A's as a dense kernel's, over all `dims.rows` rows:
    /// ceil(K/128) lines of the rows rounded up to 4, one f32 per row and 128 k. B's are each
    /// expert's ceil(N/128) lines of ceil(K/128) (one per 128x128 block), expert after expert.
    ///
    /// [`BiasArg::strided`]: crate::BiasArg::strided
    #[allow(clippy::too_many_arguments)]
    pub fn launch_grouped_with<A, B, C, R>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        group_rows: &R,
        dims: GroupedDims,
        lds: LeadingDims,
        epilogue: &mut Epilogue<'_, Out>,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
        R: DevicePtr<i32>,
    {
        let groups = self.info.groups();
        if !groups.is_grouped() {
            return Err(Error::GroupedArguments {
                kernel: self.info.name().to_string(),
                problem: "the kernel is not grouped (its spec has no `groups:`): launch it with `launch_strided_batched`".to_string(),
            });
        }
        same_context(
            &self.ctx,
            [("the row table", group_rows.stream().context())],
        )?;
        // Before the table's events are touched: a refused launch leaves the capture usable.
        check_capture_of(
            stream,
            self.ctx.is_managing_stream_synchronization(),
            || format!("launching `{}`", self.info.name()),
        )?;
        let table_len = group_rows.len();
        let (table, _table_done) = group_rows.device_ptr(stream);
        let grouped = GroupedArgs {
            table,
            groups: dims.groups,
            capacity: match groups {
                gemm_dsl::Groups::Masked => dims.rows / dims.groups.max(1),
                _ => 0,
            },
        };
        self.launch_any(
            stream,
            a,
            b,
            c,
            (dims.rows, dims.n, dims.k),
            lds,
            Batch::ONE,
            epilogue,
            Some((grouped, dims, table_len)),
        )
    }

    /// Every launch: checks, binds and launches (a grouped launch with its table's address,
    /// its sizes and the table's length).
    #[allow(clippy::too_many_arguments)]
    fn launch_any<A, B, C>(
        &self,
        stream: &CudaStream,
        a: &A,
        b: &B,
        c: &mut C,
        (m, n, k): (u32, u32, u32),
        lds: LeadingDims,
        batch: Batch,
        epilogue: &mut Epilogue<'_, Out>,
        grouped: Option<(GroupedArgs, GroupedDims, usize)>,
    ) -> Result<(), Error>
    where
        A: DevicePtr<In>,
        B: DevicePtr<InB>,
        C: DevicePtrMut<Out>,
    {
        if grouped.is_none() && self.info.groups().is_grouped() {
            return Err(Error::GroupedArguments {
                kernel: self.info.name().to_string(),
                problem: "the kernel is grouped (its spec has `groups:`): launch it with `launch_grouped` and the experts' row table".to_string(),
            });
        }
        let LeadingDims { lda, ldb, ldc } = lds;
        same_context(
            &self.ctx,
            [
                ("the stream", stream.context()),
                ("A", a.stream().context()),
                ("B", b.stream().context()),
                ("C", c.stream().context()),
            ],
        )?;
        // A grouped launch's B matrices, B scales and column biases are each expert's.
        let b_matrices = grouped
            .as_ref()
            .map_or(batch.count, |(_, dims, _)| dims.groups);
        check_arguments(
            self.info.name(),
            &self.fused,
            &epilogue.given(),
            (m, n, batch.count),
            b_matrices,
        )?;
        check_quant_scales(
            self.info.name(),
            &self.fused,
            &epilogue.given(),
            (m, n, k, batch.count),
            b_matrices,
        )?;
        if let Some(CIn::Buffer(c_in)) = &epilogue.c_in {
            same_context(&self.ctx, [("C-in", c_in.stream().context())])?;
        }
        if let Some(aux) = &epilogue.aux {
            same_context(&self.ctx, [("the aux output", aux.stream().context())])?;
        }
        if let Some(bias) = &epilogue.bias {
            let context = match &bias.values {
                BiasValues::Output(v) => v.stream().context(),
                BiasValues::F32(v) => v.stream().context(),
            };
            same_context(&self.ctx, [("the bias", context)])?;
        }
        if let Some(factors) = epilogue.row_scale {
            same_context(
                &self.ctx,
                [("the rows' factors", factors.stream().context())],
            )?;
        }
        // Before any buffer's events are touched: a refused launch leaves the capture usable.
        check_capture_of(
            stream,
            self.ctx.is_managing_stream_synchronization(),
            || format!("launching `{}`", self.info.name()),
        )?;
        let (a_len, b_len, c_len) = (a.len(), b.len(), c.len());
        // The guards make later work on other streams wait for this launch; they drop after it.
        let (a_ptr, _a_done) = a.device_ptr(stream);
        let (b_ptr, _b_done) = b.device_ptr(stream);
        let (c_ptr, _c_done) = c.device_ptr_mut(stream);
        let args = LaunchArgs {
            m,
            n,
            k,
            a: OperandArg {
                address: a_ptr,
                len: a_len,
                ld: lda,
            },
            b: OperandArg {
                address: b_ptr,
                len: b_len,
                ld: ldb,
            },
            c: OperandArg {
                address: c_ptr,
                len: c_len,
                ld: ldc,
            },
            batch,
        };
        let mut grid = check_launch(self.info.launch(), &args, self.resident_blocks)?;
        // A grouped walk's tiles are counted on the device: the grid is sized for the most
        // the table can make.
        let grouped = match grouped {
            None => None,
            Some((values, dims, table_len)) => {
                let masked = self.info.groups() == gemm_dsl::Groups::Masked;
                let stride_b =
                    check_grouped_launch(self.info.launch(), &args, dims, masked, table_len)
                        .map_err(|problem| Error::GroupedArguments {
                            kernel: self.info.name().to_string(),
                            problem,
                        })?;
                let walk_rows = grouped_walk_rows(self.info.launch(), dims, masked);
                grid =
                    self.info
                        .launch()
                        .full_grid_batched(walk_rows, n, k, 1, self.resident_blocks);
                Some((values, stride_b))
            }
        };
        // A grouped grid is sized above for the tallest walk its table can make.
        if !self.balanced_grid && grouped.is_none() {
            grid = self
                .info
                .launch()
                .full_grid_batched(m, n, k, batch.count, self.resident_blocks);
        }
        // C-in's buffer follows C's rules; the guards keep it (and the bias) borrowed for
        // the launch.
        let (c_in_address, _c_in_done) = match &epilogue.c_in {
            None => (0, None),
            Some(CIn::Output) => (c_ptr, None),
            Some(CIn::Buffer(c_in)) => {
                let len = c_in.len();
                let (ptr, done) = c_in.device_ptr(stream);
                self.check_laid_out_as_c(&args, ptr, len, "C-in")?;
                (ptr, Some(done))
            }
        };
        let (bias_address, bias_stride, _bias_done) = match &epilogue.bias {
            None => (0, 0, None),
            Some(bias) => {
                let (ptr, done) = match &bias.values {
                    BiasValues::Output(v) => v.device_ptr(stream),
                    BiasValues::F32(v) => v.device_ptr(stream),
                };
                let bytes = u64::from(bias.dtype().1);
                if ptr % bytes != 0 {
                    return Err(Error::EpilogueArguments {
                        kernel: self.info.name().to_string(),
                        problem: format!(
                            "the bias starts at {ptr:#x}, which is not {bytes}-byte aligned"
                        ),
                    });
                }
                (ptr, bias.batch_stride, Some(done))
            }
        };
        let (aux_address, _aux_done) = match epilogue.aux.as_mut() {
            None => (0, None),
            Some(aux) => {
                let len = aux.len();
                let (ptr, done) = aux.device_ptr_mut(stream);
                self.check_laid_out_as_c(&args, ptr, len, "the aux output")?;
                (ptr, Some(done))
            }
        };
        let (row_scale_address, _row_scale_done) = match epilogue.row_scale {
            None => (0, None),
            Some(factors) => {
                let (ptr, done) = factors.device_ptr(stream);
                if ptr % 4 != 0 {
                    return Err(Error::EpilogueArguments {
                        kernel: self.info.name().to_string(),
                        problem: format!(
                            "the rows' factors start at {ptr:#x}, which is not 4-byte aligned"
                        ),
                    });
                }
                (ptr, Some(done))
            }
        };
        // The fp8 scales: one aligned f32 each, kept borrowed by the guards.
        let mut quant_guards = Vec::new();
        let mut quant_addresses = [0u64; 2];
        if let Some(scales) = &epilogue.quant_scales {
            // Block scales of A are copied in 16-byte units.
            let a_align = if self.fused.quant == gemm_dsl::Quant::Block {
                16
            } else {
                4
            };
            for (slot, (what, buffer, align)) in quant_addresses
                .iter_mut()
                .zip([("A's scale", scales.a, a_align), ("B's scale", scales.b, 4)])
            {
                same_context(&self.ctx, [(what, buffer.stream().context())])?;
                let (ptr, done) = buffer.device_ptr(stream);
                if ptr % align != 0 {
                    return Err(Error::EpilogueArguments {
                        kernel: self.info.name().to_string(),
                        problem: format!(
                            "{what} lies at {ptr:#x}, which is not {align}-byte aligned"
                        ),
                    });
                }
                *slot = ptr;
                quant_guards.push(done);
            }
        }
        let fused_values = FusedValues {
            a_scale: quant_addresses[0],
            b_scale: quant_addresses[1],
            alpha: epilogue.alpha,
            beta: epilogue.beta,
            c_in: c_in_address,
            bias: bias_address,
            bias_stride,
            aux: aux_address,
            row_scale: row_scale_address,
        };
        // The lock and the guard last until the launch is enqueued.
        let mut workspace = self
            .workspace
            .as_ref()
            .map(|w| w.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        let (workspace_ptr, _workspace_done) = match workspace.as_deref_mut() {
            Some(slice) => {
                let (ptr, done) = slice.device_ptr_mut(stream);
                (Some(ptr), Some(done))
            }
            None => (None, None),
        };
        let mut values = bind_params::<In, Out, InB>(
            &self.info,
            &args,
            workspace_ptr,
            &fused_values,
            grouped,
            &self.tensor_maps,
        )?;
        let mut params: Vec<*mut c_void> = values.iter_mut().map(ParamValue::as_ptr).collect();
        let launch = self.info.launch();
        // SAFETY: the description is the PTX's own (`KernelInfo` comes only from codegen or
        // from `from_parts` under that contract), so the launch shape checked above bounds
        // what the kernel touches. Load checked that the parameter list is the one the PTX
        // declares, and bind_params filled each slot with a value of its declared kind; every
        // buffer was checked to hold what the kernel touches for these sizes and strides (a
        // tensor map only describes them), and the slices stay borrowed until the guards above
        // record the launch.
        unsafe {
            launch_raw(
                &self.ctx,
                self.function,
                LaunchDims::of(launch, grid),
                stream,
                &mut params,
            )
        }
        .during(|| {
            format!(
                "launching `{}` for {} x {m} x {n} x {k} (grid {grid:?})",
                self.info.name(),
                batch.count
            )
        })
    }

    /// A buffer of the fused epilogue laid out as C (C-in, the aux output) under C's rules:
    /// C's leading dimension and batch stride, long enough and aligned.
    fn check_laid_out_as_c(
        &self,
        args: &LaunchArgs,
        address: u64,
        len: usize,
        what: &str,
    ) -> Result<(), Error> {
        let as_c = LaunchArgs {
            c: OperandArg {
                address,
                len,
                ld: args.c.ld,
            },
            ..*args
        };
        check_launch(self.info.launch(), &as_c, self.resident_blocks)
            .map(|_| ())
            .map_err(|error| Error::EpilogueArguments {
                kernel: self.info.name().to_string(),
                problem: format!("{what}, laid out as C: {error}"),
            })
    }

    /// The SASS of the machine code this kernel runs: the cubin `cuModuleLoadDataEx` compiled
    /// for its module, read from the driver's JIT cache, disassembled by nvdisasm. Where the
    /// cache does not hold it (`CUDA_CACHE_DISABLE=1`, an evicted entry), the SASS of a copy
    /// compiled for linking, with the JIT's log as the report's resources; the origin says
    /// which. [`GemmKernel::check_sass`] accounts for the difference.
    pub fn sass(&self) -> Result<DriverSass, Error> {
        let device_cc = device_compute_capability(&self.ctx)?;
        let code = loaded_or_linked_cubin(&self.ctx, self.info.ptx(), self.info.name(), device_cc)?;
        let mut report = SassReport::parse(&sass::disassemble(&code.cubin)?);
        if matches!(code.origin, SassOrigin::LinkedCopy { .. }) {
            report.resources = Some(PtxasResources::parse(&code.log));
        }
        Ok(DriverSass {
            report,
            origin: code.origin,
        })
    }

    /// Checks the SASS of the code this kernel runs against the spec's promises and returns
    /// it. Where only a linked copy could be read, the promises linking cannot keep are
    /// checked on the loaded function instead: linking drops `setmaxnreg`, so `USETMAXREG` is
    /// checked as the loaded function's register count (compiled whole, a kernel that moves
    /// registers between warpgroups keeps its `.maxnreg` as its count; otherwise ptxas
    /// allocates what the code needs, fewer), and no local memory as the loaded function's
    /// local size (under the even split linking compiles for, consumers that need the raised
    /// count spill).
    pub fn check_sass(&self) -> Result<DriverSass, Error> {
        let driver = self.sass()?;
        let mismatch = |mismatch: SassMismatch, summary: String| Error::SassMismatch {
            kernel: self.info.name().to_string(),
            mismatch,
            summary: format!("{summary}(read from {})", driver.origin),
        };
        let mut promises: Vec<SassCheck> = self.info.expected_sass().to_vec();
        if matches!(driver.origin, SassOrigin::LinkedCopy { .. }) {
            let no_local = [
                SassCheck::Absent(Opcode::Ldl),
                SassCheck::Absent(Opcode::Stl),
            ];
            if promises.iter().any(|check| no_local.contains(check)) {
                promises.retain(|check| !no_local.contains(check));
                let local_bytes = self.function_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
                    "local memory size",
                )?;
                if local_bytes != 0 {
                    let violations = no_local
                        .iter()
                        .map(|&check| SassViolation { check, count: 1 })
                        .collect();
                    return Err(mismatch(
                        SassMismatch(violations),
                        format!(
                            "the loaded function uses {local_bytes} bytes of local memory per thread\n"
                        ),
                    ));
                }
            }
            let setmaxnreg = SassCheck::Present(Opcode::Usetmaxreg);
            if promises.contains(&setmaxnreg) {
                promises.retain(|check| *check != setmaxnreg);
                let cap = ptx_max_registers(self.info.ptx());
                let loaded = self.registers()?;
                if cap != Some(loaded) {
                    let violation = SassViolation {
                        check: setmaxnreg,
                        count: 0,
                    };
                    return Err(mismatch(
                        SassMismatch(vec![violation]),
                        format!(
                            "the loaded function has {loaded} registers per thread, not the .maxnreg {} that setmaxnreg works under\n",
                            cap.map_or("(none)".to_string(), |c| c.to_string())
                        ),
                    ));
                }
            }
        }
        driver
            .report
            .require(&promises)
            .map_err(|violations| mismatch(violations, driver.report.summary()))?;
        Ok(driver)
    }

    /// The debug-build SASS check: once per kernel text and device per process. Without
    /// nvdisasm it warns once on stderr instead of failing, since the kernel itself runs fine.
    fn check_sass_once(&self, device_cc: u32) -> Result<(), Error> {
        // Keyed by the PTX text's address (kernels are 'static), the promises and the device.
        type Key = (usize, Vec<SassCheck>, u32);
        static CHECKED: OnceLock<Mutex<HashSet<Key>>> = OnceLock::new();
        static MISSING_TOOL: Once = Once::new();
        if sass::find_tool("nvdisasm").is_err() {
            MISSING_TOOL.call_once(|| {
                eprintln!(
                    "warning: gemm-dsl runtime: nvdisasm not found, so loaded kernels' SASS is not checked in this debug build; {}",
                    sass::INSTALL_HINT
                );
            });
            return Ok(());
        }
        let key = (
            self.info.ptx().as_ptr() as usize,
            self.info.expected_sass().to_vec(),
            device_cc,
        );
        let checked = CHECKED.get_or_init(Default::default);
        if checked.lock().expect("no panics while held").contains(&key) {
            return Ok(());
        }
        self.check_sass()?;
        checked.lock().expect("no panics while held").insert(key);
        Ok(())
    }
}

/// The `.maxnreg` directive of a kernel's PTX.
fn ptx_max_registers(ptx: &str) -> Option<u32> {
    ptx.lines()
        .find_map(|line| line.trim().strip_prefix(".maxnreg"))
        .and_then(|value| value.trim().parse().ok())
}

/// Above 48 KB of dynamic shared memory a kernel must opt in. The caller has bound the
/// context `function` lives in (`Module::function` does).
pub(crate) fn allow_dynamic_smem(
    function: sys::CUfunction,
    smem: u32,
    kernel: &str,
) -> Result<(), Error> {
    if smem <= DEFAULT_DYNAMIC_SMEM_LIMIT {
        return Ok(());
    }
    // SAFETY: `function` is a live handle of a module loaded in the bound context.
    unsafe {
        sys::cuFuncSetAttribute(
            function,
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )
    }
    .result()
    .during(|| format!("allowing `{kernel}` {smem} B of dynamic shared memory"))
}

fn device_compute_capability(ctx: &CudaContext) -> Result<u32, Error> {
    let (major, minor) = ctx
        .compute_capability()
        .during(|| "reading the device's compute capability".to_string())?;
    Ok((major * 10 + minor) as u32)
}

/// Multiprocessors times the blocks of `function` one multiprocessor holds with the launch's
/// threads and dynamic shared memory.
/// Refuses streams and buffers of another context than the kernel's `own`.
pub(crate) fn same_context<'a>(
    own: &CudaContext,
    parts: impl IntoIterator<Item = (&'static str, &'a Arc<CudaContext>)>,
) -> Result<(), Error> {
    match parts
        .into_iter()
        .find(|(_, ctx)| ctx.cu_ctx() != own.cu_ctx())
    {
        Some((what, _)) => Err(Error::ContextMismatch {
            what: what.to_string(),
        }),
        None => Ok(()),
    }
}

/// Where and how wide a launch runs: grid and cluster in blocks, threads per block, dynamic
/// shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LaunchDims {
    pub grid: (u32, u32, u32),
    pub cluster: (u32, u32),
    pub threads: u32,
    pub dynamic_smem_bytes: u32,
    /// Launch cooperatively: the driver starts the grid only when every block of it can be
    /// resident at once. A stream-K grid's blocks wait for one another's partial sums, so a
    /// grid started in part (another kernel holding the rest of the device, itself waiting)
    /// could wait forever.
    pub cooperative: bool,
}

impl LaunchDims {
    pub fn of(launch: &LaunchShape, grid: (u32, u32, u32)) -> LaunchDims {
        LaunchDims {
            grid,
            cluster: launch.cluster_dims(),
            threads: launch.threads_per_block,
            dynamic_smem_bytes: launch.dynamic_smem_bytes,
            cooperative: launch.workspace_bytes_per_block > 0,
        }
    }
}

/// Binds `ctx` and launches `function` on `stream`, through `cuLaunchKernelEx` with the
/// cluster dimension attribute where the launch has clusters and the cooperative attribute
/// where its blocks wait for one another.
///
/// # Safety
/// `params` must point to live values matching the kernel's parameter list, and every buffer
/// they name must hold what the kernel touches.
pub(crate) unsafe fn launch_raw(
    ctx: &CudaContext,
    function: sys::CUfunction,
    dims: LaunchDims,
    stream: &CudaStream,
    params: &mut [*mut c_void],
) -> Result<(), cudarc::driver::DriverError> {
    ctx.bind_to_thread()?;
    let LaunchDims {
        grid,
        threads,
        dynamic_smem_bytes,
        cluster,
        cooperative,
    } = dims;
    // SAFETY: the attribute is plain data, valid when zeroed.
    let mut attributes: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
    let mut attribute_count = 0;
    if cluster != (1, 1) {
        attributes[attribute_count] = cluster_attribute(cluster);
        attribute_count += 1;
    }
    if cooperative {
        attributes[attribute_count] = cooperative_attribute();
        attribute_count += 1;
    }
    if attribute_count == 0 {
        // SAFETY: the caller's contract covers the parameters; the context is bound.
        return unsafe {
            sys::cuLaunchKernel(
                function,
                grid.0,
                grid.1,
                grid.2,
                threads,
                1,
                1,
                dynamic_smem_bytes,
                stream.cu_stream(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result();
    }
    let config = launch_config(dims, stream.cu_stream(), &mut attributes[..attribute_count]);
    // SAFETY: as above; `config` points at `attributes`, which outlive the call.
    unsafe { sys::cuLaunchKernelEx(&config, function, params.as_mut_ptr(), std::ptr::null_mut()) }
        .result()
}

/// The launch attribute that groups blocks into `x x y` clusters.
fn cluster_attribute((x, y): (u32, u32)) -> sys::CUlaunchAttribute {
    // SAFETY: the attribute is plain data, valid when zeroed.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute.value.clusterDim.x = x;
    attribute.value.clusterDim.y = y;
    attribute.value.clusterDim.z = 1;
    attribute
}

/// The launch attribute of a cooperative launch (see [`LaunchDims::cooperative`]).
fn cooperative_attribute() -> sys::CUlaunchAttribute {
    // SAFETY: the attribute is plain data, valid when zeroed.
    let mut attribute: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attribute.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attribute.value.cooperative = 1;
    attribute
}

/// `cuLaunchKernelEx`'s description of a launch with these attributes.
fn launch_config(
    dims: LaunchDims,
    stream: sys::CUstream,
    attributes: &mut [sys::CUlaunchAttribute],
) -> sys::CUlaunchConfig {
    // SAFETY: as for the attribute.
    let mut config: sys::CUlaunchConfig = unsafe { std::mem::zeroed() };
    config.gridDimX = dims.grid.0;
    config.gridDimY = dims.grid.1;
    config.gridDimZ = dims.grid.2;
    config.blockDimX = dims.threads;
    config.blockDimY = 1;
    config.blockDimZ = 1;
    config.sharedMemBytes = dims.dynamic_smem_bytes;
    config.hStream = stream;
    config.attrs = attributes.as_mut_ptr();
    config.numAttrs = attributes.len() as u32;
    config
}

/// One kernel parameter's value, laid out as the kernel reads it.
enum ParamValue {
    U64(u64),
    U32(u32),
    F32(f32),
    TensorMap(Box<TensorMap>),
}

/// The fused epilogue's parameter values of one launch (0 where the kernel reads none).
struct FusedValues {
    a_scale: u64,
    b_scale: u64,
    alpha: f32,
    beta: f32,
    c_in: u64,
    bias: u64,
    bias_stride: u64,
    aux: u64,
    row_scale: u64,
}

impl ParamValue {
    fn as_ptr(&mut self) -> *mut c_void {
        match self {
            ParamValue::U64(value) => (value as *mut u64).cast(),
            ParamValue::U32(value) => (value as *mut u32).cast(),
            ParamValue::F32(value) => (value as *mut f32).cast(),
            ParamValue::TensorMap(map) => (&mut **map as *mut TensorMap).cast(),
        }
    }
}

/// The value of every parameter, in order, from a checked launch's arguments: operand
/// pointers, problem numbers, batch strides, and tensor maps encoded over the operands as
/// they lie in memory (a column-major operand's map runs down its columns, its third
/// dimension over the batch's matrices).
fn bind_params<In: Element, Out: Element, InB: Element>(
    info: &KernelInfo<'_>,
    args: &LaunchArgs,
    workspace: Option<u64>,
    fused: &FusedValues,
    grouped: Option<(GroupedArgs, u64)>,
    tensor_maps: &TensorMapCache,
) -> Result<Vec<ParamValue>, Error> {
    let grouped_value = |what: &str| {
        grouped.ok_or_else(|| Error::GroupedArguments {
            kernel: info.name().to_string(),
            problem: format!("the kernel takes {what}, and the launch is not grouped"),
        })
    };
    let launch = info.launch();
    let operand = |operand: Operand| {
        let (rows, cols) = launch.stored_dims(operand, args.m, args.n, args.k);
        match operand {
            Operand::A => (args.a, rows, cols, In::BYTES, In::TENSOR_MAP_TYPE),
            Operand::B => (args.b, rows, cols, InB::BYTES, InB::TENSOR_MAP_TYPE),
            Operand::C => (args.c, rows, cols, Out::BYTES, Out::TENSOR_MAP_TYPE),
        }
    };
    info.params()
        .iter()
        .map(|param| {
            Ok(match param.kind {
                ParamKind::Pointer(which) => ParamValue::U64(operand(which).0.address),
                ParamKind::U32(scalar) => ParamValue::U32(match scalar {
                    Scalar::M => args.m,
                    Scalar::N => args.n,
                    Scalar::K => args.k,
                    Scalar::Lda => args.a.ld,
                    Scalar::Ldb => args.b.ld,
                    Scalar::Ldc => args.c.ld,
                    Scalar::Batch => args.batch.count,
                    Scalar::Groups => grouped_value("the experts' count")?.0.groups,
                    Scalar::GroupCapacity => grouped_value("a masked capacity")?.0.capacity,
                }),
                ParamKind::GroupRows => ParamValue::U64(grouped_value("a row table")?.0.table),
                ParamKind::BatchStride(which) => ParamValue::U64(match (grouped, which) {
                    // A grouped launch's B holds one matrix per expert: the kernel takes
                    // the expert's as the tile's product.
                    (Some((_, stride_b)), Operand::B) => stride_b,
                    _ => args.batch.stride(which),
                }),
                // Load allocates the workspace of every kernel whose launch shape asks for one.
                ParamKind::Workspace => {
                    ParamValue::U64(workspace.ok_or_else(|| workspace_mismatch(info))?)
                }
                ParamKind::Factor(Factor::Alpha) => ParamValue::F32(fused.alpha),
                ParamKind::Factor(Factor::Beta) => ParamValue::F32(fused.beta),
                ParamKind::EpilogueBuffer(EpilogueBuffer::CIn) => ParamValue::U64(fused.c_in),
                ParamKind::EpilogueBuffer(EpilogueBuffer::Bias) => ParamValue::U64(fused.bias),
                ParamKind::EpilogueBuffer(EpilogueBuffer::Aux) => ParamValue::U64(fused.aux),
                ParamKind::EpilogueBuffer(EpilogueBuffer::AScale) => ParamValue::U64(fused.a_scale),
                ParamKind::EpilogueBuffer(EpilogueBuffer::BScale) => ParamValue::U64(fused.b_scale),
                ParamKind::EpilogueBuffer(EpilogueBuffer::RowScale) => {
                    ParamValue::U64(fused.row_scale)
                }
                ParamKind::BiasBatchStride => ParamValue::U64(fused.bias_stride),
                ParamKind::TensorMap(tile) => {
                    let (arg, rows, cols, element_bytes, data_type) = operand(tile.operand);
                    // An operand every product shares is one matrix; the kernel reads it
                    // as matrix 0.
                    let (stride, matrices) = match (grouped, tile.operand) {
                        // A grouped launch's B holds one matrix per expert.
                        (Some((values, stride_b)), Operand::B) => (stride_b, values.groups),
                        _ => {
                            let stride = args.batch.stride(tile.operand);
                            (stride, if stride == 0 { 1 } else { args.batch.count })
                        }
                    };
                    let matrix = GlobalMatrix {
                        address: arg.address,
                        rows,
                        cols,
                        ld: arg.ld,
                        element_bytes,
                        matrices,
                        matrix_stride: stride,
                    };
                    ParamValue::TensorMap(Box::new(tensor_maps.encode(&tile, matrix, data_type)?))
                }
                ParamKind::CInTensorMap(tile) => {
                    // C-in is laid out as C: C's sizes, leading dimension and batch stride.
                    let (c, rows, cols, element_bytes, data_type) = operand(Operand::C);
                    let matrix = GlobalMatrix {
                        address: fused.c_in,
                        rows,
                        cols,
                        ld: c.ld,
                        element_bytes,
                        matrices: args.batch.count,
                        matrix_stride: args.batch.stride(Operand::C),
                    };
                    ParamValue::TensorMap(Box::new(tensor_maps.encode(&tile, matrix, data_type)?))
                }
            })
        })
        .collect()
}

/// [`GemmKernel::limit_grid`]'s grid: at most `blocks` and the `resident` ones, in whole
/// clusters of `per_cluster`, one cluster at least.
fn limited_grid(resident: u32, blocks: u32, per_cluster: u32) -> u32 {
    let per_cluster = per_cluster.max(1);
    (blocks.min(resident) / per_cluster * per_cluster).max(per_cluster)
}

/// The zeroed global workspace of a kernel that needs one (stream-K), for a grid of
/// `resident_blocks`: its largest.
fn workspace(
    ctx: &Arc<CudaContext>,
    info: &KernelInfo<'static>,
    resident_blocks: u32,
) -> Result<Option<Mutex<CudaSlice<u8>>>, Error> {
    let per_block = info.launch().workspace_bytes_per_block;
    if takes_workspace(info) != (per_block > 0) {
        return Err(workspace_mismatch(info));
    }
    if per_block == 0 {
        return Ok(None);
    }
    let bytes = resident_blocks as usize * per_block as usize;
    let stream = ctx.default_stream();
    let slice = stream
        .alloc_zeros::<u8>(bytes)
        .during(|| format!("allocating the {bytes}-byte workspace of `{}`", info.name()))?;
    // Zeroed before any launch, whatever stream it comes on.
    stream
        .synchronize()
        .during(|| format!("zeroing the workspace of `{}`", info.name()))?;
    Ok(Some(Mutex::new(slice)))
}

fn takes_workspace(info: &KernelInfo<'_>) -> bool {
    info.params().iter().any(|p| p.kind == ParamKind::Workspace)
}

/// A description whose workspace parameter and workspace size disagree (load refuses it, so
/// no launch binds a workspace parameter without a workspace).
fn workspace_mismatch(info: &KernelInfo<'_>) -> Error {
    Error::ParamsMismatch {
        kernel: info.name().to_string(),
        declared: format!(
            "{} workspace parameter",
            if takes_workspace(info) { "a" } else { "no" }
        ),
        described: format!(
            "{} workspace bytes per block",
            info.launch().workspace_bytes_per_block
        ),
    }
}

/// Blocks of this kernel the device runs at once: multiprocessors times blocks per
/// multiprocessor, or for a clustered kernel the clusters that fit at once times their size
/// (`cuOccupancyMaxActiveClusters` also says when a cluster cannot be placed at all).
fn resident_blocks(
    ctx: &Arc<CudaContext>,
    function: sys::CUfunction,
    info: &KernelInfo<'static>,
) -> Result<u32, Error> {
    let launch = info.launch();
    let cluster = launch.cluster_dims();
    if cluster != (1, 1) {
        let cluster_blocks = cluster.0 * cluster.1;
        let dims = LaunchDims::of(launch, (cluster.0, cluster.1, 1));
        let mut attributes = [cluster_attribute(cluster)];
        let config = launch_config(dims, std::ptr::null_mut(), &mut attributes);
        let mut clusters: std::ffi::c_int = 0;
        // SAFETY: `function` is a live handle of a module loaded in the bound context;
        // `config` points at `attributes`, which outlive the call; it writes one int.
        unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, function, &config) }
            .result()
            .during(|| format!("asking how many clusters of `{}` fit", info.name()))?;
        let clusters = u32::try_from(clusters).unwrap_or(0);
        if clusters == 0 {
            return Err(Error::ClusterDoesNotFit {
                kernel: info.name().to_string(),
                cluster: launch.cluster_dims(),
                smem_bytes: launch.dynamic_smem_bytes,
            });
        }
        return Ok(clusters * cluster_blocks);
    }
    let mut per_sm: std::ffi::c_int = 0;
    // SAFETY: `function` is a live handle of a module loaded in the bound context; the call
    // writes one int.
    unsafe {
        sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
            &mut per_sm,
            function,
            launch.threads_per_block as std::ffi::c_int,
            launch.dynamic_smem_bytes as usize,
        )
    }
    .result()
    .during(|| format!("asking the occupancy of `{}`", info.name()))?;
    let sms = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .during(|| "reading the multiprocessor count".to_string())?;
    Ok(u32::try_from(per_sm).unwrap_or(0) * u32::try_from(sms).unwrap_or(0))
}

/// The parameter list the launcher fills must be the one the kernel's PTX declares, in
/// order, with the same types: launching with any other would hand the kernel garbage.
fn check_params(info: &KernelInfo<'_>) -> Result<(), Error> {
    let described: Vec<String> = info
        .params()
        .iter()
        .map(|param| param.ptx_declaration(info.name()))
        .collect();
    let declared = declared_params(info.ptx(), info.name());
    if declared.as_ref() == Some(&described) {
        return Ok(());
    }
    Err(Error::ParamsMismatch {
        kernel: info.name().to_string(),
        declared: declared.map_or_else(
            || format!("no `.entry {}`", info.name()),
            |params| params.join(", "),
        ),
        described: described.join(", "),
    })
}

/// The `.param` declarations of the PTX entry `kernel`, whitespace normalized; `None` when
/// the PTX has no such entry.
fn declared_params(ptx: &str, kernel: &str) -> Option<Vec<String>> {
    let entry = ptx.split(".entry").skip(1).find(|rest| {
        rest.trim_start()
            .strip_prefix(kernel)
            .is_some_and(|after| after.trim_start().starts_with('('))
    })?;
    let list = &entry[entry.find('(')? + 1..];
    let list = &list[..list.find(')')?];
    Some(
        list.split(',')
            .map(|param| param.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|param| !param.is_empty())
            .collect(),
    )
}

/// Sizes must agree, and so must the type the spec names (f16 and bf16 have the same
/// size): its `dtype` for the input, its `out` for the output.
fn check_element<E: Element>(
    info: &KernelInfo<'_>,
    role: &'static str,
    named: DType,
    kernel_bytes: u32,
) -> Result<(), Error> {
    if kernel_bytes == E::BYTES && stores::<E>(named.name()) {
        return Ok(());
    }
    Err(Error::ElementType {
        kernel: info.name().to_string(),
        role,
        kernel_type: named.name().to_string(),
        kernel_bytes,
        rust_type: E::NAME,
        rust_bytes: E::BYTES,
    })
}

/// A `'static` view of an emitted kernel: each distinct kernel is leaked once and shared by
/// every later load of it.
#[cfg(feature = "emit")]
pub(crate) fn intern(emitted: &Emitted) -> KernelInfo<'static> {
    // An `Emitted` is read-only and a function of its spec text (the name, the PTX, the launch
    // shape, the parameters and the promises all follow from it), so the text is the key.
    static INTERNED: OnceLock<Mutex<HashMap<String, &'static Emitted>>> = OnceLock::new();
    let mut table = INTERNED
        .get_or_init(Default::default)
        .lock()
        .expect("no panics while held");
    let interned: &'static Emitted = table
        .entry(emitted.spec_text().to_string())
        .or_insert_with(|| Box::leak(Box::new(emitted.clone())));
    interned.info()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_codegen::catalog::CATALOG;
    use gemm_codegen::Emitted;

    fn emitted(name: &str) -> Emitted {
        let entry = CATALOG.iter().find(|e| e.name == name).unwrap();
        gemm_codegen::emit_str(entry.spec).unwrap()
    }

    #[test]
    fn element_types_are_checked_by_size_and_name() {
        let emitted = emitted("simt_128x128x8_cp2");
        let info = emitted.info();
        let input_bytes = info.launch().input_element_bytes;
        check_element::<f32>(&info, "input", DType::F32, input_bytes).unwrap();
        let error =
            check_element::<half::bf16>(&info, "input", DType::F32, input_bytes).unwrap_err();
        assert_eq!(
            error.to_string(),
            "`simt_128x128x8_cp2` has input elements of type f32 (4 B), but was loaded as bf16 (2 B)"
        );
        // Same size, other name: f16 where the spec says bf16.
        let mut parts = info.parts();
        parts.spec = "name: h, dtype: bf16, out: bf16";
        parts.launch.input_element_bytes = 2;
        parts.launch.output_element_bytes = 2;
        // SAFETY: only checked, never loaded.
        let bf16_info = unsafe { KernelInfo::from_parts(parts) };
        let (_, _, out) = spec_types(&bf16_info).unwrap();
        check_element::<half::bf16>(&bf16_info, "output", out, 2).unwrap();
        assert!(matches!(
            check_element::<half::f16>(&bf16_info, "output", out, 2),
            Err(Error::ElementType { role: "output", .. })
        ));
    }

    #[test]
    fn catalog_kernels_declare_the_params_they_describe_and_others_are_refused() {
        for entry in CATALOG {
            check_params(&gemm_codegen::emit_str(entry.spec).unwrap().info()).unwrap();
        }
        let emitted = emitted("simt_64x64x16_ca2");
        // Descriptions that break `from_parts`' contract in the one way load checks.
        let described = |edit: fn(&mut gemm_dsl::abi::KernelParts<'_>)| {
            let mut parts = emitted.info().parts();
            edit(&mut parts);
            // SAFETY: only checked, never loaded.
            unsafe { KernelInfo::from_parts(parts) }
        };
        // One parameter short of what the PTX declares.
        let info = described(|parts| parts.params = &gemm_dsl::abi::GEMM_PARAMS[..8]);
        let error = check_params(&info).unwrap_err();
        assert!(matches!(error, Error::ParamsMismatch { .. }));
        assert!(
            error
                .to_string()
                .contains(".param .u32 simt_64x64x16_ca2_ldb)"),
            "{error}"
        );
        // A description of another kernel's entry.
        let info = described(|parts| parts.name = "another_kernel");
        let error = check_params(&info).unwrap_err().to_string();
        assert!(error.contains("(no `.entry another_kernel`)"), "{error}");
    }

    #[test]
    fn the_register_cap_is_read_from_the_ptx() {
        let hopper = emitted("wgmma_bf16_128x256x64_s4_persistent");
        assert_eq!(ptx_max_registers(hopper.ptx()), Some(168));
        assert_eq!(ptx_max_registers(".visible .entry k()\n{\n}"), None);
    }

    #[test]
    fn entry_params_are_read_whatever_the_layout() {
        let ptx = ".visible .entry k(\n\t.param .u64 k_a, .param .u32 k_m,\n\t.param .align 64 .b8 k_map[128]\n)\n{\n}";
        assert_eq!(
            declared_params(ptx, "k").unwrap(),
            [
                ".param .u64 k_a",
                ".param .u32 k_m",
                ".param .align 64 .b8 k_map[128]"
            ]
        );
        assert_eq!(declared_params(ptx, "kk"), None);
        assert_eq!(declared_params(".visible .entry k_other(\n)", "k"), None);
    }

    #[test]
    #[cfg(feature = "emit")]
    fn interning_shares_one_copy_per_kernel() {
        let first = intern(&emitted("simt_128x128x16_cp3"));
        let second = intern(&emitted("simt_128x128x16_cp3"));
        assert!(std::ptr::eq(first.ptx(), second.ptx()));
        assert!(std::ptr::eq(first.params(), second.params()));
        assert_eq!(first.name(), "simt_128x128x16_cp3");
        let other = intern(&emitted("simt_128x128x16_cp4_pad"));
        assert!(!std::ptr::eq(first.ptx(), other.ptx()));
        assert_eq!(other.ptx(), emitted("simt_128x128x16_cp4_pad").ptx());
        assert_eq!(other.launch(), emitted("simt_128x128x16_cp4_pad").launch());
    }

    #[test]
    fn a_limited_grid_is_whole_clusters_within_the_device() {
        assert_eq!(limited_grid(132, 128, 1), 128);
        assert_eq!(limited_grid(132, 500, 1), 132);
        assert_eq!(limited_grid(132, 127, 2), 126);
        assert_eq!(limited_grid(132, 1, 2), 2);
        assert_eq!(limited_grid(132, 0, 1), 1);
    }
}
