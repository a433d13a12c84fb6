//! Staging an input into 16-byte lines ([`gemm_dsl::pick::Repack`]): a copy kernel writes
//! the operand's lines into scratch whose leading dimension is a whole number of 16-byte
//! words (the padding zeroed), and the product runs on the scratch with a 16-byte kernel.
//!
//! The scratch is a stream-ordered allocation (`cuMemAllocAsync` from the device's default
//! pool) freed on the same stream after the product, so a capture holds it as the graph's
//! own allocation and free nodes beside the two kernels.

use crate::capture::check_capture_of;
use crate::error::{DriverContext, Error};
use crate::jit::Module;
use crate::kernel::{launch_raw, LaunchDims};
use cudarc::driver::sys::{self, CUdeviceptr};
use cudarc::driver::{result, CudaContext, CudaStream, DevicePtr, DeviceSlice, SyncOnDrop};
use gemm_dsl::abi::{Operand, StorageOrder};
use gemm_dsl::pick::repack::{staged_ld, stored_dims, LINE_ALIGN_BYTES};
use gemm_dsl::pick::Problem;
use std::ffi::c_void;
use std::fmt::Write;
use std::marker::PhantomData;
use std::sync::Arc;

/// Threads per block of the copy: 32 chunks of a line (one warp) on each of 8 lines.
const CHUNKS_PER_WARP: u32 = 32;
const LINES_PER_BLOCK: u32 = 8;
/// The most blocks along the lines and along the batch (the grid's y and z limits); the
/// blocks stride over the rest.
const MAX_GRID_YZ: u32 = 65535;

/// The copy's entry for elements of `bytes` (1, 2 or 4).
fn entry(bytes: u32) -> String {
    format!("gemm_dsl_stage_lines_b{}", 8 * bytes)
}

/// The copy kernels' PTX, an entry per element size. Warp `y` of block (x, ..) copies the
/// 32 chunks of 16 bytes from chunk `32 * x` of line `blockIdx.y * 8 + y` (striding over the
/// lines and the batch): its lanes read consecutive elements (the source's lines start at
/// any element; zero past a line's end), 32 at a time, into the warp's 512 bytes of shared
/// memory, then each lane stores one chunk with one 16-byte store. Both global accesses of
/// a warp are contiguous.
pub(crate) fn ptx() -> String {
    let mut text = String::from(".version 8.0\n.target sm_80\n.address_size 64\n");
    for bytes in [1u32, 2, 4] {
        write_entry(&mut text, bytes);
    }
    text
}

fn write_entry(text: &mut String, bytes: u32) {
    let per_chunk = LINE_ALIGN_BYTES / bytes;
    let bits = 8 * bytes;
    let name = entry(bytes);
    let warp_bytes = CHUNKS_PER_WARP * LINE_ALIGN_BYTES;
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
	.reg .pred	%p<2>;
	.reg .b32	%lane, %chunk, %chunks, %line, %lines, %line_len, %left, %first, %batch, %matrix;
	.reg .b32	%thread, %step, %value, %smem, %smem_lane, %w<4>;
	.reg .b64	%src, %dst, %src_ld, %dst_ld, %src_stride, %dst_stride, %at, %from, %to, %wide;
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
	// The warp's first chunk and element; a warp past the line's last chunk has nothing to do
	// (the same for every lane: the warp leaves together).
	mov.u32	%first, %ctaid.x;
	mul.lo.u32	%chunk, %first, {CHUNKS_PER_WARP};
	setp.ge.u32	%p0, %chunk, %chunks;
	@%p0 bra	$L_done;
	add.u32	%chunk, %chunk, %lane;
	mul.lo.u32	%first, %first, {warp_elements};
	// The elements of the line left from the warp's first (at most all of its {warp_elements}).
	setp.ge.u32	%p1, %first, %line_len;
	sub.u32	%left, %line_len, %first;
	selp.u32	%left, 0, %left, %p1;
	mov.u32	%smem, {name}_smem;
	shr.u32	%step, %thread, {warp_shift};
	mad.lo.u32	%smem, %step, {warp_bytes}, %smem;
	mad.lo.u32	%smem_lane, %lane, {bytes}, %smem;
	mov.u32	%matrix, %ctaid.z;
$L_matrix:
	setp.ge.u32	%p0, %matrix, %batch;
	@%p0 bra	$L_done;
	shr.u32	%line, %thread, {warp_shift};
	mov.u32	%step, %ctaid.y;
	mad.lo.u32	%line, %step, {LINES_PER_BLOCK}, %line;
$L_line:
	setp.ge.u32	%p0, %line, %lines;
	@%p0 bra	$L_next_matrix;
	// Element offsets: the matrix, the line, the warp's first element (the source), the
	// lane's chunk (the scratch).
	mul.wide.u32	%from, %matrix, 1;
	mul.lo.u64	%at, %from, %src_stride;
	cvt.u64.u32	%wide, %line;
	mad.lo.u64	%at, %wide, %src_ld, %at;
	cvt.u64.u32	%wide, %first;
	add.u64	%at, %at, %wide;
	cvt.u64.u32	%wide, %lane;
	add.u64	%at, %at, %wide;
	mad.lo.u64	%from, %at, {bytes}, %src;
	mul.wide.u32	%to, %matrix, 1;
	mul.lo.u64	%at, %to, %dst_stride;
	cvt.u64.u32	%wide, %line;
	mad.lo.u64	%at, %wide, %dst_ld, %at;
	mul.wide.u32	%wide, %chunk, {per_chunk};
	add.u64	%at, %at, %wide;
	mad.lo.u64	%to, %at, {bytes}, %dst;
	// The warp's elements, lane after lane, {per_chunk} rounds of 32.
",
        block_bytes = warp_bytes * LINES_PER_BLOCK,
        lane_mask = CHUNKS_PER_WARP - 1,
        warp_shift = CHUNKS_PER_WARP.trailing_zeros(),
        warp_elements = CHUNKS_PER_WARP * per_chunk,
    );
    for round in 0..per_chunk {
        let element = round * CHUNKS_PER_WARP;
        let _ = write!(
            text,
            "\tmov.u32\t%value, 0;\n\tsub.u32\t%step, %left, {element};\n\tsetp.lt.u32\t%p0, %lane, %step;\n\tsetp.gt.u32\t%p1, %left, {element};\n\tand.pred\t%p0, %p0, %p1;\n\t@%p0 ld.global.nc.u{bits}\t%value, [%from+{offset}];\n\tst.shared.u{bits}\t[%smem_lane+{offset}], %value;\n",
            offset = element * bytes,
        );
    }
    let _ = write!(
        text,
        "	bar.warp.sync	-1;
	// Each lane's chunk, in one 16-byte store; lanes past the line's last chunk store none.
	setp.lt.u32	%p0, %chunk, %chunks;
	mad.lo.u32	%step, %lane, {LINE_ALIGN_BYTES}, %smem;
	ld.shared.v4.b32	{{ %w0, %w1, %w2, %w3 }}, [%step];
	@%p0 st.global.v4.b32	[%to], {{ %w0, %w1, %w2, %w3 }};
	// Every lane has read its chunk before the next line's elements overwrite them.
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

/// The loaded copy kernels of one context.
pub(crate) struct StagingCopy {
    ctx: Arc<CudaContext>,
    /// Holds the entries' code.
    _module: Module,
    /// The entries for elements of 1, 2 and 4 bytes.
    entries: [sys::CUfunction; 3],
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
        let function = |bytes| module.function(&entry(bytes));
        let entries = [function(1)?, function(2)?, function(4)?];
        Ok(StagingCopy {
            ctx: ctx.clone(),
            _module: module,
            entries,
        })
    }

    /// Copies `operand` of `problem` (its caller's lines, elements of `element_bytes`, a
    /// batch's matrices `source_stride` elements apart) from `source` into fresh scratch of
    /// staged lines, its matrices back to back, on `stream`.
    pub(crate) fn stage<'s, T, P: DevicePtr<T>>(
        &self,
        stream: &'s CudaStream,
        source: &P,
        problem: &Problem,
        operand: Operand,
        source_stride: u64,
        element_bytes: u32,
    ) -> Result<Scratch<'s>, Error> {
        let (lines, line_len) = stored_dims(problem, operand);
        let source_ld = problem.ld(operand);
        check_source(source.len(), problem, operand, source_stride)?;
        let staged = staged_ld(source_ld, element_bytes);
        let matrix = u64::from(lines) * u64::from(staged);
        let elements = matrix * u64::from(problem.batch);
        let what = || format!("staging {} into 16-byte lines", operand.name());
        check_capture_of(stream, self.ctx.is_managing_stream_synchronization(), what)?;
        let scratch = Scratch::alloc(stream, elements * u64::from(element_bytes))?;
        let (source_address, _read) = source.device_ptr(stream);
        let chunks = staged / (LINE_ALIGN_BYTES / element_bytes);
        let dims = LaunchDims {
            grid: (
                chunks.div_ceil(CHUNKS_PER_WARP),
                lines.div_ceil(LINES_PER_BLOCK).clamp(1, MAX_GRID_YZ),
                problem.batch.clamp(1, MAX_GRID_YZ),
            ),
            cluster: (1, 1),
            threads: CHUNKS_PER_WARP * LINES_PER_BLOCK,
            dynamic_smem_bytes: 0,
            cooperative: false,
        };
        let mut values = (
            source_address,
            scratch.address,
            lines,
            line_len,
            u64::from(source_ld),
            u64::from(staged),
            source_stride,
            matrix,
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
        let function = match element_bytes {
            1 => self.entries[0],
            2 => self.entries[1],
            _ => self.entries[2],
        };
        // SAFETY: the parameters match the entry's list; the source holds the batch's lines
        // (`check_source`) and the scratch `elements`.
        unsafe { launch_raw(&self.ctx, function, dims, stream, &mut params) }.during(what)?;
        Ok(scratch)
    }
}

/// The checks the product's launch makes of an operand's lines and length, made of the
/// caller's buffer before the copy reads it (the launch then checks the scratch).
fn check_source(len: usize, problem: &Problem, operand: Operand, stride: u64) -> Result<(), Error> {
    let (lines, line_len) = stored_dims(problem, operand);
    let ld = problem.ld(operand);
    let row_major = match operand {
        Operand::A => problem.layout.a_row_major(),
        _ => problem.layout.b_row_major(),
    };
    let order = if row_major {
        StorageOrder::RowMajor
    } else {
        StorageOrder::ColMajor
    };
    if ld < line_len {
        return Err(Error::LeadingDimTooSmall {
            operand,
            order,
            ld,
            row_len: line_len,
        });
    }
    let matrix = u64::from(lines.max(1) - 1) * u64::from(ld) + u64::from(line_len);
    let needed = u64::from(problem.batch.max(1) - 1) * stride + matrix;
    if (len as u64) >= needed {
        return Ok(());
    }
    Err(if problem.batch > 1 {
        Error::BatchBufferTooSmall {
            operand,
            len,
            needed,
            count: problem.batch,
            stride,
            matrix,
        }
    } else {
        Error::BufferTooSmall {
            operand,
            order,
            len,
            needed,
            rows: lines,
            cols: line_len,
            ld,
        }
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use gemm_dsl::sass::SassReport;

    /// The copy assembles for every architecture the sets run on; its SASS reads elements
    /// of one, two and four bytes (never a vector: the source's lines start anywhere) and
    /// writes only 16-byte stores.
    #[test]
    fn the_staging_copy_assembles_to_narrow_loads_and_16_byte_stores() {
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
            let stores = opcodes("STG");
            assert!(stores.len() >= 3, "{arch}: {stores:?}");
            assert!(
                stores.iter().all(|s| s.ends_with(".128")),
                "{arch}: {stores:?}"
            );
            let loads = opcodes("LDG");
            for width in [".U8", ".U16"] {
                assert!(loads.iter().any(|l| l.contains(width)), "{arch}: {loads:?}");
            }
            assert!(
                !loads
                    .iter()
                    .any(|l| l.contains(".64") || l.contains(".128")),
                "{arch}: {loads:?}"
            );
        }
    }
}
