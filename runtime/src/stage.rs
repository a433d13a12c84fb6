//! Staging operands in 128-byte lines ([`gemm_dsl::pick::Repack`]): a copy kernel writes an
//! input's lines into scratch whose leading dimension is a whole number of 128 bytes (the
//! padding zeroed), the product runs on the scratch with a 16-byte kernel, and a C computed
//! into such scratch is copied into the caller's lines after it (only the line's elements:
//! what lies between a line's end and the next line is not the product's).
//!
//! The scratch is a stream-ordered allocation (`cuMemAllocAsync` from the device's default
//! pool) freed on the same stream after the product, so a capture holds it as the graph's
//! own allocation and free nodes beside the kernels.
//!
//! The copies' PTX is written here rather than by `gemm-codegen`: they are no spec's kernel,
//! and a runtime built without `emit` (no code generator) stages too.

use crate::capture::check_capture_of;
use crate::check::{
    check_batch_stride, check_buffer_length, check_line_length, elements_needed, OperandArg,
};
use crate::error::{DriverContext, Error};
use crate::jit::Module;
use crate::kernel::{launch_raw, LaunchDims};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{
    result, CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop,
};
use gemm_dsl::abi::{Operand, StorageOrder};
use gemm_dsl::pick::repack::{staged_ld, stored_dims, LINE_ALIGN_BYTES};
use gemm_dsl::pick::Problem;
use std::ffi::c_void;
use std::fmt::Write;
use std::marker::PhantomData;
use std::sync::Arc;

/// A block of the copy: 8 warps, each taking 32 chunks of 16 bytes along a line on 4 lines at
/// once (all of their loads in flight before the first is used: a line's 512 bytes a warp
/// keep too few bytes in flight to near the HBM's bandwidth).
const CHUNKS_PER_WARP: u32 = 32;
const WARPS_PER_BLOCK: u32 = 8;
const LINES_PER_WARP: u32 = 4;
const LINES_PER_BLOCK: u32 = WARPS_PER_BLOCK * LINES_PER_WARP;
/// The most blocks along the lines and along the batch (the grid's y and z limits); the
/// blocks stride over the rest.
const MAX_GRID_YZ: u32 = 65535;

/// Which way a copy runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// The caller's lines (starting at any element) into scratch lines.
    In,
    /// Scratch lines into the caller's.
    Out,
}

/// The copy's entry for elements of `bytes` (1, 2 or 4).
fn entry(direction: Direction, bytes: u32) -> String {
    let verb = match direction {
        Direction::In => "stage",
        Direction::Out => "unstage",
    };
    format!("gemm_dsl_{verb}_lines_b{}", 8 * bytes)
}

/// The copy kernels' PTX, an entry per direction and element size. Warp `w` of block
/// (x, y, ..) copies the 32 chunks of 16 bytes from chunk `32 * x` of the scratch's lines
/// `(8 * y + w) * 4 ..` (four lines, striding over the lines and the batch) through 512
/// bytes of shared memory a line: on the caller's side its lanes access consecutive
/// elements, 32 at a time (the caller's lines start at any element), on the scratch's side
/// each lane one chunk in one 16-byte access. Staging in reads zero past a line's end;
/// staging out writes only the line's elements. Both global accesses of a warp are
/// contiguous.
pub(crate) fn ptx() -> String {
    let mut text = String::from(".version 8.0\n.target sm_80\n.address_size 64\n");
    for direction in [Direction::In, Direction::Out] {
        for bytes in [1u32, 2, 4] {
            write_entry(&mut text, direction, bytes);
        }
    }
    text
}

fn write_entry(text: &mut String, direction: Direction, bytes: u32) {
    let per_chunk = LINE_ALIGN_BYTES / bytes;
    let bits = 8 * bytes;
    let name = entry(direction, bytes);
    let line_bytes = CHUNKS_PER_WARP * LINE_ALIGN_BYTES;
    let warp_bytes = line_bytes * LINES_PER_WARP;
    // The caller's side is addressed by the lane's element, the scratch's by its chunk.
    let (src_offset, dst_offset) = match direction {
        Direction::In => ("%element", "%chunk_element"),
        Direction::Out => ("%chunk_element", "%element"),
    };
    let values = per_chunk * LINES_PER_WARP;
    // Writing to a String cannot fail.
    let _ = write!(
        text,
        "
.visible .entry {name}(
	.param .u64 {name}_src, .param .u64 {name}_dst,
	.param .u32 {name}_lines, .param .u32 {name}_line_len,
	.param .u64 {name}_src_ld, .param .u64 {name}_dst_ld,
	.param .u64 {name}_src_stride, .param .u64 {name}_dst_stride,
	.param .u32 {name}_batch, .param .u32 {name}_chunks)
{{
	.shared .align 16 .b8	{name}_smem[{block_bytes}];
	.reg .pred	%p<2>, %in_line<{LINES_PER_WARP}>, %in_chunk<{LINES_PER_WARP}>;
	.reg .b32	%lane, %chunk, %chunks, %line, %lines, %line_len, %left, %first, %batch, %matrix;
	.reg .b32	%thread, %step, %smem, %smem_lane, %smem_chunk, %row, %v<{values}>, %w<{words}>;
	.reg .b64	%src, %dst, %src_ld, %dst_ld, %src_stride, %dst_stride, %at, %wide, %src_matrix, %dst_matrix;
	.reg .b64	%element, %chunk_element, %from<{LINES_PER_WARP}>, %to<{LINES_PER_WARP}>;
	ld.param.u64	%src, [{name}_src];
	ld.param.u64	%dst, [{name}_dst];
	cvta.to.global.u64	%src, %src;
	cvta.to.global.u64	%dst, %dst;
	ld.param.u32	%lines, [{name}_lines];
	ld.param.u32	%line_len, [{name}_line_len];
	ld.param.u64	%src_ld, [{name}_src_ld];
	ld.param.u64	%dst_ld, [{name}_dst_ld];
	ld.param.u64	%src_stride, [{name}_src_stride];
	ld.param.u64	%dst_stride, [{name}_dst_stride];
	ld.param.u32	%batch, [{name}_batch];
	ld.param.u32	%chunks, [{name}_chunks];
	mov.u32	%thread, %tid.x;
	and.b32	%lane, %thread, {lane_mask};
	// The warp's first chunk and element; a warp past the lines' last chunk has nothing to do
	// (the same for every lane: the warp leaves together).
	mov.u32	%first, %ctaid.x;
	mul.lo.u32	%chunk, %first, {CHUNKS_PER_WARP};
	setp.ge.u32	%p0, %chunk, %chunks;
	@%p0 bra	$L_done;
	add.u32	%chunk, %chunk, %lane;
	mul.lo.u32	%first, %first, {warp_elements};
	// The elements of a line left from the warp's first (at most all of its {warp_elements}).
	setp.ge.u32	%p1, %first, %line_len;
	sub.u32	%left, %line_len, %first;
	selp.u32	%left, 0, %left, %p1;
	// The lane's element and chunk from a line's start.
	add.u32	%step, %first, %lane;
	cvt.u64.u32	%element, %step;
	mul.wide.u32	%chunk_element, %chunk, {per_chunk};
	mov.u32	%smem, {name}_smem;
	shr.u32	%row, %thread, {warp_shift};
	mad.lo.u32	%smem, %row, {warp_bytes}, %smem;
	mad.lo.u32	%smem_lane, %lane, {bytes}, %smem;
	mad.lo.u32	%smem_chunk, %lane, {LINE_ALIGN_BYTES}, %smem;
	mov.u32	%matrix, %ctaid.z;
$L_matrix:
	setp.ge.u32	%p0, %matrix, %batch;
	@%p0 bra	$L_done;
	mul.wide.u32	%wide, %matrix, 1;
	mul.lo.u64	%src_matrix, %wide, %src_stride;
	mul.lo.u64	%dst_matrix, %wide, %dst_stride;
	mov.u32	%step, %ctaid.y;
	mad.lo.u32	%line, %step, {WARPS_PER_BLOCK}, %row;
	mul.lo.u32	%line, %line, {LINES_PER_WARP};
$L_line:
	setp.ge.u32	%p0, %line, %lines;
	@%p0 bra	$L_next_matrix;
",
        block_bytes = warp_bytes * WARPS_PER_BLOCK,
        words = 4 * LINES_PER_WARP,
        lane_mask = CHUNKS_PER_WARP - 1,
        warp_shift = CHUNKS_PER_WARP.trailing_zeros(),
        warp_elements = CHUNKS_PER_WARP * per_chunk,
    );
    // Each of the warp's lines: whether it exists, where the lane's element or chunk lies
    // in the source and in the destination.
    for line in 0..LINES_PER_WARP {
        let _ = write!(
            text,
            "\tadd.u32\t%step, %line, {line};
	setp.lt.u32\t%in_line{line}, %step, %lines;
	setp.lt.and.u32\t%in_chunk{line}, %chunk, %chunks, %in_line{line};
	cvt.u64.u32\t%wide, %step;
	mad.lo.u64\t%at, %wide, %src_ld, %src_matrix;
	add.u64\t%at, %at, {src_offset};
	mad.lo.u64\t%from{line}, %at, {bytes}, %src;
	mad.lo.u64\t%at, %wide, %dst_ld, %dst_matrix;
	add.u64\t%at, %at, {dst_offset};
	mad.lo.u64\t%to{line}, %at, {bytes}, %dst;
"
        );
    }
    // Element `round * 32 + lane` of the warp's on `line`: whether the line holds it, then
    // `access`.
    let element_rounds = |text: &mut String, access: &dyn Fn(u32, u32, u32) -> String| {
        for line in 0..LINES_PER_WARP {
            for round in 0..per_chunk {
                let element = round * CHUNKS_PER_WARP;
                let _ = write!(
                    text,
                    "\tsub.u32\t%step, %left, {element};\n\tsetp.lt.and.u32\t%p1, %lane, %step, %in_line{line};\n\tsetp.gt.and.u32\t%p1, %left, {element}, %p1;\n{}",
                    access(line, round, element * bytes),
                );
            }
        }
    };
    match direction {
        Direction::In => {
            text.push_str("\t// The caller's elements, every line's loads in flight at once (0 past a line's end).\n");
            element_rounds(text, &|line, round, offset| {
                let value = line * per_chunk + round;
                format!("\tmov.u32\t%v{value}, 0;\n\t@%p1 ld.global.nc.u{bits}\t%v{value}, [%from{line}+{offset}];\n")
            });
            for line in 0..LINES_PER_WARP {
                for round in 0..per_chunk {
                    let _ = writeln!(
                        text,
                        "\tst.shared.u{bits}\t[%smem_lane+{}], %v{};",
                        line * line_bytes + round * CHUNKS_PER_WARP * bytes,
                        line * per_chunk + round
                    );
                }
            }
            text.push_str("\tbar.warp.sync\t-1;\n\t// Each lane's chunk of every line, in one 16-byte store; none past a line's last chunk.\n");
            for line in 0..LINES_PER_WARP {
                let (words, offset) = (chunk_words(line), line * line_bytes);
                let _ = write!(
                    text,
                    "\tld.shared.v4.b32\t{words}, [%smem_chunk+{offset}];\n\t@%in_chunk{line} st.global.v4.b32\t[%to{line}], {words};\n",
                );
            }
        }
        Direction::Out => {
            text.push_str("\t// Each lane's chunk of every scratch line, in one 16-byte load each, all in flight.\n");
            for line in 0..LINES_PER_WARP {
                let words = chunk_words(line);
                let _ = writeln!(
                    text,
                    "\t@%in_chunk{line} ld.global.nc.v4.b32\t{words}, [%from{line}];"
                );
            }
            for line in 0..LINES_PER_WARP {
                let (words, offset) = (chunk_words(line), line * line_bytes);
                let _ = writeln!(text, "\tst.shared.v4.b32\t[%smem_chunk+{offset}], {words};");
            }
            text.push_str("\tbar.warp.sync\t-1;\n\t// The lines' elements into the caller's, none past a line's end.\n");
            element_rounds(text, &|line, round, offset| {
                let value = line * per_chunk + round;
                format!(
                    "\tld.shared.u{bits}\t%v{value}, [%smem_lane+{}];\n\t@%p1 st.global.u{bits}\t[%to{line}+{offset}], %v{value};\n",
                    line * line_bytes + offset
                )
            });
        }
    }
    let _ = write!(
        text,
        "	// Every lane is done with the shared words before the next lines' overwrite them.
	bar.warp.sync	-1;
	mov.u32	%step, %nctaid.y;
	mad.lo.u32	%line, %step, {LINES_PER_BLOCK}, %line;
	bra.uni	$L_line;
$L_next_matrix:
	mov.u32	%step, %nctaid.z;
	add.u32	%matrix, %matrix, %step;
	bra.uni	$L_matrix;
$L_done:
	ret;
}}
"
    );
}

/// The four words that hold the lane's 16-byte chunk of the warp's `line`.
fn chunk_words(line: u32) -> String {
    let first = 4 * line;
    format!(
        "{{ %w{first}, %w{}, %w{}, %w{} }}",
        first + 1,
        first + 2,
        first + 3
    )
}

/// The loaded copy kernels of one context.
pub(crate) struct StagingCopy {
    ctx: Arc<CudaContext>,
    /// Holds the entries' code.
    _module: Module,
    /// The entries in and out, for elements of 1, 2 and 4 bytes.
    entries: [[sys::CUfunction; 3]; 2],
}

// SAFETY: CUfunction handles are valid in every thread that binds their context, which
// `launch_raw` does first; the module that owns them lives as long as they do.
unsafe impl Send for StagingCopy {}
unsafe impl Sync for StagingCopy {}

impl std::fmt::Debug for StagingCopy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StagingCopy")
    }
}

/// The name a capture that would load the copy is refused with.
pub(crate) const STAGING_COPY: &str = "the staging copy (gemm_dsl_stage_lines)";

impl StagingCopy {
    pub(crate) fn load(ctx: &Arc<CudaContext>) -> Result<StagingCopy, Error> {
        let module = Module::load(ctx, &ptx(), STAGING_COPY)?;
        let entries = |direction| -> Result<[sys::CUfunction; 3], Error> {
            let function = |bytes| module.function(&entry(direction, bytes));
            Ok([function(1)?, function(2)?, function(4)?])
        };
        let entries = [entries(Direction::In)?, entries(Direction::Out)?];
        Ok(StagingCopy {
            ctx: ctx.clone(),
            _module: module,
            entries,
        })
    }

    /// Copies `operand` of `problem` (its caller's lines, elements of `element_bytes`, a
    /// batch's matrices `stride` elements apart) from `source` into fresh scratch of staged
    /// lines, its matrices back to back, on `stream`.
    pub(crate) fn stage<'s, T, P: DevicePtr<T>>(
        &self,
        stream: &'s CudaStream,
        source: &P,
        problem: &Problem,
        operand: Operand,
        stride: u64,
        element_bytes: u32,
    ) -> Result<Scratch<'s>, Error> {
        let scratch = self.scratch(
            stream,
            source.len(),
            problem,
            operand,
            stride,
            element_bytes,
        )?;
        let (source_address, _read) = source.device_ptr(stream);
        self.copy(
            stream,
            Direction::In,
            (source_address, scratch.address),
            problem,
            operand,
            stride,
            element_bytes,
        )?;
        Ok(scratch)
    }

    /// Fresh scratch of staged lines for `operand` of `problem`, whose caller's buffer is
    /// `caller_len` elements long (checked as the launch checks it, a batch's matrices
    /// `stride` elements apart): the output a product writes before [`StagingCopy::unstage`].
    pub(crate) fn scratch<'s>(
        &self,
        stream: &'s CudaStream,
        caller_len: usize,
        problem: &Problem,
        operand: Operand,
        stride: u64,
        element_bytes: u32,
    ) -> Result<Scratch<'s>, Error> {
        check_caller_buffer(caller_len, problem, operand, stride)?;
        let what = || format!("staging {} in 128-byte lines", operand.name());
        check_capture_of(stream, self.ctx.is_managing_stream_synchronization(), what)?;
        let (lines, _) = stored_dims(problem, operand);
        let staged = staged_ld(problem.ld(operand), element_bytes);
        let elements = u64::from(lines) * u64::from(staged) * u64::from(problem.batch);
        Scratch::alloc(stream, elements * u64::from(element_bytes))
    }

    /// Copies `scratch` (C's, from [`StagingCopy::scratch`], after the product) into the
    /// caller's lines of C in `dest`, only the lines' elements.
    pub(crate) fn unstage<T, P: DevicePtrMut<T>>(
        &self,
        stream: &CudaStream,
        scratch: &Scratch<'_>,
        dest: &mut P,
        problem: &Problem,
        stride: u64,
        element_bytes: u32,
    ) -> Result<(), Error> {
        let (dest_address, _written) = dest.device_ptr_mut(stream);
        self.copy(
            stream,
            Direction::Out,
            (scratch.address, dest_address),
            problem,
            Operand::C,
            stride,
            element_bytes,
        )
    }

    /// One copy's launch between the caller's lines of `operand` (a batch's matrices
    /// `stride` elements apart) and its scratch lines, `addresses` (source, destination).
    #[allow(clippy::too_many_arguments)]
    fn copy(
        &self,
        stream: &CudaStream,
        direction: Direction,
        (src, dst): (u64, u64),
        problem: &Problem,
        operand: Operand,
        stride: u64,
        element_bytes: u32,
    ) -> Result<(), Error> {
        let (lines, line_len) = stored_dims(problem, operand);
        let caller_ld = u64::from(problem.ld(operand));
        let staged = staged_ld(problem.ld(operand), element_bytes);
        let matrix = u64::from(lines) * u64::from(staged);
        let chunks = staged / (LINE_ALIGN_BYTES / element_bytes);
        let dims = LaunchDims {
            grid: (
                chunks.div_ceil(CHUNKS_PER_WARP),
                lines.div_ceil(LINES_PER_BLOCK).clamp(1, MAX_GRID_YZ),
                problem.batch.clamp(1, MAX_GRID_YZ),
            ),
            cluster: (1, 1),
            threads: CHUNKS_PER_WARP * WARPS_PER_BLOCK,
            dynamic_smem_bytes: 0,
            cooperative: false,
        };
        // (ld, batch stride) of the source and the destination.
        let ((src_ld, src_stride), (dst_ld, dst_stride)) = match direction {
            Direction::In => ((caller_ld, stride), (u64::from(staged), matrix)),
            Direction::Out => ((u64::from(staged), matrix), (caller_ld, stride)),
        };
        let mut values = (
            src,
            dst,
            lines,
            line_len,
            src_ld,
            dst_ld,
            src_stride,
            dst_stride,
            problem.batch,
            chunks,
        );
        let mut params: [*mut c_void; 10] = [
            (&mut values.0 as *mut u64).cast(),
            (&mut values.1 as *mut u64).cast(),
            (&mut values.2 as *mut u32).cast(),
            (&mut values.3 as *mut u32).cast(),
            (&mut values.4 as *mut u64).cast(),
            (&mut values.5 as *mut u64).cast(),
            (&mut values.6 as *mut u64).cast(),
            (&mut values.7 as *mut u64).cast(),
            (&mut values.8 as *mut u32).cast(),
            (&mut values.9 as *mut u32).cast(),
        ];
        let by_size = &self.entries[match direction {
            Direction::In => 0,
            Direction::Out => 1,
        }];
        let function = match element_bytes {
            1 => by_size[0],
            2 => by_size[1],
            _ => by_size[2],
        };
        let what = || {
            format!(
                "copying {}'s lines {direction:?} of scratch",
                operand.name()
            )
        };
        // SAFETY: the parameters match the entry's list; the caller's buffer holds the
        // batch's lines (`check_caller_buffer`) and the scratch `lines x staged` elements
        // per matrix.
        unsafe { launch_raw(&self.ctx, function, dims, stream, &mut params) }.during(what)
    }
}

/// The checks the product's launch makes of an operand's lines and length, made of the
/// caller's buffer before a copy touches it (the launch then checks the scratch).
fn check_caller_buffer(
    len: usize,
    problem: &Problem,
    operand: Operand,
    stride: u64,
) -> Result<(), Error> {
    let (lines, line_len) = stored_dims(problem, operand);
    let row_major = match operand {
        Operand::A => problem.layout.a_row_major(),
        Operand::B => problem.layout.b_row_major(),
        Operand::C => true,
    };
    let order = if row_major {
        StorageOrder::RowMajor
    } else {
        StorageOrder::ColMajor
    };
    // The copies read and write elements one at a time: any address and line stride will do.
    let arg = OperandArg {
        address: 0,
        len,
        ld: problem.ld(operand),
    };
    check_line_length(operand, order, arg.ld, line_len)?;
    check_buffer_length(operand, order, arg, lines, line_len)?;
    // The products' C matrices must not overlap either: the copy out would write them over
    // each other (the launch checks only the scratch's).
    let matrix = elements_needed(lines, line_len, arg.ld);
    check_batch_stride(operand, (problem.batch, stride), arg, matrix, 1, 1)
}

/// Scratch from the stream-ordered allocator, freed on its stream when dropped (after the
/// work queued on it so far).
pub(crate) struct Scratch<'s> {
    address: CUdeviceptr,
    bytes: u64,
    stream: &'s CudaStream,
}

impl<'s> Scratch<'s> {
    fn alloc(stream: &'s CudaStream, bytes: u64) -> Result<Scratch<'s>, Error> {
        stream
            .context()
            .bind_to_thread()
            .during(|| "binding the CUDA context".to_string())?;
        let size = usize::try_from(bytes.max(1)).unwrap_or(usize::MAX);
        // SAFETY: a plain allocation on a live stream; freed in Drop on the same stream.
        let address = unsafe { result::malloc_async(stream.cu_stream(), size) }
            .during(|| format!("allocating {bytes} bytes of staging scratch"))?;
        Ok(Scratch {
            address,
            bytes,
            stream,
        })
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by `malloc_async` on this stream; work that reads it was queued
        // on the same stream before.
        let freed = unsafe { result::free_async(self.address, self.stream.cu_stream()) };
        // Errors here have no caller to go to; the context records them for the next call.
        self.stream.context().record_err(freed);
    }
}

/// An operand as the product reads it: the caller's buffer, or its staged copy (whose
/// stream, for cudarc's bookkeeping, is the caller's buffer's).
pub(crate) enum Staged<'p, P, T> {
    Given(&'p P),
    Copy {
        given: &'p P,
        scratch: &'p Scratch<'p>,
        types: PhantomData<fn() -> T>,
    },
}

impl<'p, P, T> Staged<'p, P, T> {
    pub(crate) fn copy(given: &'p P, scratch: &'p Scratch<'p>) -> Self {
        Staged::Copy {
            given,
            scratch,
            types: PhantomData,
        }
    }
}

impl<P: DeviceSlice<T>, T> DeviceSlice<T> for Staged<'_, P, T> {
    fn len(&self) -> usize {
        match self {
            Staged::Given(given) => given.len(),
            Staged::Copy { scratch, .. } => {
                (scratch.bytes / std::mem::size_of::<T>().max(1) as u64) as usize
            }
        }
    }

    fn stream(&self) -> &Arc<CudaStream> {
        match self {
            Staged::Given(given) | Staged::Copy { given, .. } => given.stream(),
        }
    }
}

impl<P: DevicePtr<T>, T> DevicePtr<T> for Staged<'_, P, T> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        match self {
            Staged::Given(given) => given.device_ptr(stream),
            Staged::Copy { scratch, .. } => (scratch.address, SyncOnDrop::Record(None)),
        }
    }
}

/// C as the product writes it: the caller's buffer, or scratch of staged lines that
/// [`StagingCopy::unstage`] copies into it after (whose stream, for cudarc's bookkeeping, is
/// the caller's buffer's).
pub(crate) struct StagedOut<'p, P, T> {
    given: &'p mut P,
    scratch: Option<&'p Scratch<'p>>,
    types: PhantomData<fn() -> T>,
}

impl<'p, P, T> StagedOut<'p, P, T> {
    pub(crate) fn new(given: &'p mut P, scratch: Option<&'p Scratch<'p>>) -> Self {
        StagedOut {
            given,
            scratch,
            types: PhantomData,
        }
    }
}

impl<P: DeviceSlice<T>, T> DeviceSlice<T> for StagedOut<'_, P, T> {
    fn len(&self) -> usize {
        match self.scratch {
            None => self.given.len(),
            Some(scratch) => (scratch.bytes / std::mem::size_of::<T>().max(1) as u64) as usize,
        }
    }

    fn stream(&self) -> &Arc<CudaStream> {
        self.given.stream()
    }
}

impl<P: DevicePtr<T>, T> DevicePtr<T> for StagedOut<'_, P, T> {
    fn device_ptr<'a>(&'a self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        match self.scratch {
            None => self.given.device_ptr(stream),
            Some(scratch) => (scratch.address, SyncOnDrop::Record(None)),
        }
    }
}

impl<P: DevicePtrMut<T>, T> DevicePtrMut<T> for StagedOut<'_, P, T> {
    fn device_ptr_mut<'a>(&'a mut self, stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        match self.scratch {
            None => self.given.device_ptr_mut(stream),
            Some(scratch) => (scratch.address, SyncOnDrop::Record(None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::sass::SassReport;
    use gemm_dsl::Layout;

    /// The caller's buffers are checked as a launch checks them before a copy touches them:
    /// lines shorter than their elements, a buffer shorter than the batch's lines, and the
    /// products' C matrices over one another are refused.
    #[test]
    fn the_callers_buffers_are_checked_before_a_copy() {
        let problem = Problem::new(777, 4099, 2048, Layout::RowRow);
        // B: 2048 lines of 4099, C: 777 lines of 4099.
        let b_len = 2047 * 4099 + 4099;
        assert!(check_caller_buffer(b_len, &problem, Operand::B, 0).is_ok());
        assert!(matches!(
            check_caller_buffer(b_len - 1, &problem, Operand::B, 0),
            Err(Error::BufferTooSmall { needed, .. }) if needed == b_len as u64
        ));
        let short_lines = problem.with_leading_dims(2048, 4098, 4099);
        assert!(matches!(
            check_caller_buffer(b_len, &short_lines, Operand::B, 0),
            Err(Error::LeadingDimTooSmall {
                ld: 4098,
                row_len: 4099,
                ..
            })
        ));
        let batch = problem.with_batch(3);
        let c_matrix = 776 * 4099 + 4099;
        let c_len = 3 * c_matrix as usize;
        assert!(check_caller_buffer(c_len, &batch, Operand::C, c_matrix).is_ok());
        assert!(matches!(
            check_caller_buffer(c_len - 1, &batch, Operand::C, c_matrix),
            Err(Error::BatchBufferTooSmall { count: 3, .. })
        ));
        assert!(matches!(
            check_caller_buffer(c_len, &batch, Operand::C, c_matrix - 1),
            Err(Error::OverlappingBatch { .. })
        ));
        // A shared input is no overlap: every product reads the same B.
        assert!(check_caller_buffer(b_len, &batch, Operand::B, 0).is_ok());
    }

    /// The copies assemble for every architecture the sets run on; their SASS touches the
    /// caller's lines one element (1, 2 or 4 bytes) at a time, never in a vector (they start
    /// anywhere), and the scratch lines only 16 bytes at a time.
    #[test]
    fn the_staging_copies_assemble_to_element_accesses_and_16_byte_ones() {
        for arch in ["sm_80", "sm_90a"] {
            let report = SassReport::from_ptx(&ptx(), arch)
                .unwrap_or_else(|error| panic!("{arch}: {error}"));
            let opcodes = |prefix: &str| -> Vec<&str> {
                report
                    .instructions
                    .iter()
                    .map(|i| i.opcode.as_str())
                    .filter(|opcode| opcode.starts_with(prefix))
                    .collect()
            };
            let (loads, stores) = (opcodes("LDG"), opcodes("STG"));
            let vector = |access: &&str| access.contains(".128");
            let narrow = |access: &&str| !access.contains(".64") && !access.contains(".128");
            // Staging in: element loads, 16-byte stores; out: the other way round.
            for accesses in [&loads, &stores] {
                assert!(accesses.iter().any(vector), "{arch}: {accesses:?}");
                assert!(
                    accesses.iter().all(|a| vector(a) || narrow(a)),
                    "{arch}: {accesses:?}"
                );
                for width in [".U8", ".U16"] {
                    assert!(
                        accesses.iter().any(|a| a.contains(width)),
                        "{arch}: {accesses:?}"
                    );
                }
            }
        }
    }
}
