//! Planned calls run on the caller's memory and stream: one `Matmul` per device, element
//! types and fused epilogue, made the first time a call needs it and kept for the process.

use crate::operands::{BiasSpan, Call, Span};
use gemm_dsl::pick::{self, sets, DeviceModel, Problem};
use gemm_dsl::{Arch, Aux, Bias, DType, RowScale, Scale};
use gemm_runtime::cudarc::driver::sys::{self, CUdeviceptr, CUstream};
use gemm_runtime::cudarc::driver::{
    CudaContext, CudaStream, DevicePtr, DevicePtrMut, DeviceSlice, SyncOnDrop,
};
use gemm_runtime::fp8::{E4m3, E5m2};
use gemm_runtime::{
    driver_present, open_context, BiasArg, CIn, Element, Epilogue, Error, FusedSpec, KernelTypes,
    Matmul, Picker,
};
use half::{bf16, f16};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};

/// Device memory the caller owns (a torch tensor's storage), seen as a buffer of `len`
/// elements from `address`. The caller orders its own work on the stream; nothing here
/// records or waits on events.
pub(crate) struct Borrowed<T> {
    address: u64,
    len: usize,
    stream: Arc<CudaStream>,
    element: PhantomData<T>,
}

impl<T> Borrowed<T> {
    pub(crate) fn new(span: Span, stream: &Arc<CudaStream>) -> Self {
        Borrowed {
            address: span.address,
            len: span.len,
            stream: stream.clone(),
            element: PhantomData,
        }
    }
}

impl<T> DeviceSlice<T> for Borrowed<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }
}

impl<T> DevicePtr<T> for Borrowed<T> {
    fn device_ptr<'a>(&'a self, _stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        (self.address, SyncOnDrop::Record(None))
    }
}

impl<T> DevicePtrMut<T> for Borrowed<T> {
    fn device_ptr_mut<'a>(&'a mut self, _stream: &'a CudaStream) -> (CUdeviceptr, SyncOnDrop<'a>) {
        (self.address, SyncOnDrop::Record(None))
    }
}

/// Runs `f` and puts back the thread's current CUDA context afterwards: opening a device and
/// launching on it make its context current, and torch reads its current device from that.
pub(crate) fn keeping_current_context<T>(f: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    if !driver_present() {
        return f(); // which opens no context: it fails with `Error::NoDriver`
    }
    let mut current: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: the driver library is present (checked above); the out-pointer is a local.
    unsafe { sys::cuCtxGetCurrent(&mut current) };
    let result = f();
    // SAFETY: `current` was the thread's context a moment ago (or none); the caller keeps it
    // alive, as it is the caller's.
    unsafe { sys::cuCtxSetCurrent(current) };
    result
}

/// The fused epilogue a call needs: none for `a @ b`.
pub fn fused_spec(call: &Call) -> FusedSpec {
    let scale = if call.c_in.is_some() {
        Scale::AlphaBeta
    } else if call.alpha != 1.0 {
        Scale::Alpha
    } else {
        Scale::None
    };
    let bias = call.bias.map_or(Bias::None, |bias| Bias::Vector {
        along: bias.along,
        dtype: bias.dtype,
    });
    FusedSpec {
        scale,
        bias,
        activation: call.activation,
        aux: Aux::None,
        quant: call.quant,
        row_scale: RowScale::None,
    }
}

/// A `Matmul` for one pair of element types.
enum Typed {
    Bf16(Matmul<bf16, bf16>),
    Bf16F32(Matmul<bf16, f32>),
    F16(Matmul<f16, f16>),
    F16F32(Matmul<f16, f32>),
    F32(Matmul<f32, f32>),
    E4m3Bf16(Matmul<E4m3, bf16>),
    E4m3F16(Matmul<E4m3, f16>),
    E4m3F32(Matmul<E4m3, f32>),
    E5m2Bf16(Matmul<E5m2, bf16>),
    E5m2F16(Matmul<E5m2, f16>),
    E5m2F32(Matmul<E5m2, f32>),
}

/// Runs `$body` with `$matmul` bound to the typed `Matmul` inside a [`Typed`].
macro_rules! with_typed {
    ($typed:expr, $matmul:ident => $body:expr) => {
        match $typed {
            Typed::Bf16($matmul) => $body,
            Typed::Bf16F32($matmul) => $body,
            Typed::F16($matmul) => $body,
            Typed::F16F32($matmul) => $body,
            Typed::F32($matmul) => $body,
            Typed::E4m3Bf16($matmul) => $body,
            Typed::E4m3F16($matmul) => $body,
            Typed::E4m3F32($matmul) => $body,
            Typed::E5m2Bf16($matmul) => $body,
            Typed::E5m2F16($matmul) => $body,
            Typed::E5m2F32($matmul) => $body,
        }
    };
}

impl Typed {
    fn new(ctx: &Arc<CudaContext>, types: KernelTypes, fused: FusedSpec) -> Result<Typed, Error> {
        Ok(match (types.dtype(), types.out()) {
            (DType::Bf16, DType::Bf16) => Typed::Bf16(Matmul::new_fused(ctx, fused)?),
            (DType::Bf16, DType::F32) => Typed::Bf16F32(Matmul::new_fused(ctx, fused)?),
            (DType::F16, DType::F16) => Typed::F16(Matmul::new_fused(ctx, fused)?),
            (DType::F16, DType::F32) => Typed::F16F32(Matmul::new_fused(ctx, fused)?),
            (DType::F32, DType::F32) => Typed::F32(Matmul::new_fused(ctx, fused)?),
            (DType::E4m3, DType::Bf16) => Typed::E4m3Bf16(Matmul::new_fused(ctx, fused)?),
            (DType::E4m3, DType::F16) => Typed::E4m3F16(Matmul::new_fused(ctx, fused)?),
            (DType::E4m3, DType::F32) => Typed::E4m3F32(Matmul::new_fused(ctx, fused)?),
            (DType::E5m2, DType::Bf16) => Typed::E5m2Bf16(Matmul::new_fused(ctx, fused)?),
            (DType::E5m2, DType::F16) => Typed::E5m2F16(Matmul::new_fused(ctx, fused)?),
            (DType::E5m2, DType::F32) => Typed::E5m2F32(Matmul::new_fused(ctx, fused)?),
            _ => unreachable!("operands::plan_matmul admits these types only"),
        })
    }

    fn picker(&self) -> &Picker {
        with_typed!(self, matmul => matmul.picker())
    }

    fn pick(&self, problem: &Problem) -> Result<(String, &'static str), Error> {
        with_typed!(self, matmul => {
            let picked = matmul.pick(problem)?;
            Ok((picked.kernel.to_string(), source_name(picked.source)))
        })
    }
}

fn source_name(source: gemm_runtime::PickSource) -> &'static str {
    match source {
        gemm_runtime::PickSource::Cache => "tuning cache",
        gemm_runtime::PickSource::Model => "cost model",
    }
}

/// One device's context, opened with the runtime's event tracking off: every buffer here is
/// the caller's, ordered by the caller's stream, and a launch inside a CUDA graph capture
/// must not wait on events recorded outside it.
struct DeviceEntry {
    ordinal: u32,
    ctx: Arc<CudaContext>,
}

struct MatmulEntry {
    ordinal: u32,
    types: KernelTypes,
    fused: FusedSpec,
    typed: Arc<Typed>,
}

/// Every context and `Matmul` made so far: a handful, searched in order.
#[derive(Default)]
struct Registry {
    devices: Vec<DeviceEntry>,
    matmuls: Vec<MatmulEntry>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    devices: Vec::new(),
    matmuls: Vec::new(),
});

fn context(registry: &mut Registry, ordinal: u32) -> Result<Arc<CudaContext>, Error> {
    if let Some(entry) = registry.devices.iter().find(|d| d.ordinal == ordinal) {
        return Ok(entry.ctx.clone());
    }
    let ctx = open_context(ordinal as usize)?;
    // SAFETY: called before this context allocates anything here; buffers are the caller's
    // and their order is the caller's stream's.
    unsafe { ctx.disable_event_tracking() };
    registry.devices.push(DeviceEntry {
        ordinal,
        ctx: ctx.clone(),
    });
    Ok(ctx)
}

/// Device `ordinal`'s context, opened (with event tracking off) the first time.
pub(crate) fn device_context(ordinal: u32) -> Result<Arc<CudaContext>, Error> {
    let mut registry = REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    context(&mut registry, ordinal)
}

fn typed(
    ordinal: u32,
    types: KernelTypes,
    fused: FusedSpec,
) -> Result<(Arc<CudaContext>, Arc<Typed>), Error> {
    let mut registry = REGISTRY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let ctx = context(&mut registry, ordinal)?;
    if let Some(entry) = registry
        .matmuls
        .iter()
        .find(|e| e.ordinal == ordinal && e.types == types && e.fused == fused)
    {
        return Ok((ctx, entry.typed.clone()));
    }
    let typed = Arc::new(Typed::new(&ctx, types, fused)?);
    registry.matmuls.push(MatmulEntry {
        ordinal,
        types,
        fused,
        typed: typed.clone(),
    });
    Ok((ctx, typed))
}

/// Runs a planned call on `stream` (a `CUstream` of the call's device, as torch's
/// `cuda_stream` gives it; 0 is the legacy default stream).
pub fn run(call: &Call, stream: u64) -> Result<(), Error> {
    let fused = fused_spec(call);
    let (ctx, typed) = typed(call.device, call.types, fused)?;
    // SAFETY: the caller passes its current stream on this device, alive for the call; work
    // queued here is ordered with the caller's by that stream.
    let stream = unsafe { ctx.wrap_borrowed_stream(stream as CUstream) };
    with_typed!(&*typed, matmul => run_typed(matmul, call, fused, &stream))
}

fn run_typed<In: Element, Out: Element>(
    matmul: &Matmul<In, Out>,
    call: &Call,
    fused: FusedSpec,
    stream: &Arc<CudaStream>,
) -> Result<(), Error> {
    for offsets in &call.launches {
        let at = |span: Span, elements: u64, bytes: u32| Span {
            address: span.address + elements * u64::from(bytes),
            ..span
        };
        let a = Borrowed::<In>::new(at(call.a, offsets.a, In::BYTES), stream);
        let b = Borrowed::<In>::new(at(call.b, offsets.b, In::BYTES), stream);
        let mut c = Borrowed::<Out>::new(at(call.c, offsets.c, Out::BYTES), stream);
        if fused.is_none() {
            matmul.run_strided(stream, &a, &b, &mut c, &call.problem, call.batch)?;
            continue;
        }
        let c_in = call
            .c_in
            .map(|span| Borrowed::<Out>::new(at(span, offsets.c, Out::BYTES), stream));
        let bias_out;
        let bias_f32;
        let scales = call.quant_scales.map(|(a, b)| {
            (
                Borrowed::<f32>::new(a, stream),
                Borrowed::<f32>::new(b, stream),
            )
        });
        let mut epilogue = Epilogue::<Out>::none().alpha(call.alpha);
        if let Some((scale_a, scale_b)) = &scales {
            epilogue = epilogue.quant_scales(scale_a, scale_b);
        }
        if let Some(c_in) = &c_in {
            epilogue = epilogue.beta(call.beta, CIn::Buffer(c_in));
        }
        match call.bias {
            Some(BiasSpan {
                span,
                dtype: DType::F32,
                ..
            }) => {
                bias_f32 = Borrowed::<f32>::new(span, stream);
                epilogue = epilogue.bias(BiasArg::f32(&bias_f32));
            }
            Some(BiasSpan { span, .. }) => {
                bias_out = Borrowed::<Out>::new(span, stream);
                epilogue = epilogue.bias(BiasArg::output(&bias_out));
            }
            None => {}
        }
        matmul.run_fused(stream, &a, &b, &mut c, &call.problem, &mut epilogue)?;
    }
    Ok(())
}

/// What the entry point picks for a planned call on its device: the kernel's name and
/// whether the tuning cache or the cost model chose it.
pub fn pick_on_device(call: &Call) -> Result<(String, &'static str), Error> {
    let (_, typed) = typed(call.device, call.types, fused_spec(call))?;
    typed.pick(&call.problem)
}

/// Why the entry point picks what it does for a planned call on its device: the pick and its
/// source, then the candidates its cost model ranks, fastest first, and the refused ones
/// with the reason (one line each).
pub fn explain_on_device(call: &Call) -> Result<Vec<String>, Error> {
    let (_, typed) = typed(call.device, call.types, fused_spec(call))?;
    let (kernel, source) = typed.pick(&call.problem)?;
    let picker = typed.picker();
    let mut lines = vec![format!("{}: {kernel} (from the {source})", call.problem)];
    lines.extend(ranking_lines(
        picker.candidates(),
        &call.problem,
        picker.device(),
    ));
    Ok(lines)
}

/// [`explain_on_device`] without a GPU: the cost model's ranking over the built-in set of
/// `arch` on its modelled board ([`DeviceModel::for_arch`]).
pub fn explain_for_arch(call: &Call, arch: Arch) -> Result<Vec<String>, String> {
    let cc = arch.compute_capability();
    let fused = fused_spec(call);
    let set = sets::for_device_with(cc, call.types.dtype(), fused.quant)
        .ok_or_else(|| format!("no built-in kernel set for {} on sm_{cc}", call.types))?;
    let picker = Picker::of_set(set, call.types, &fused).map_err(|error| error.to_string())?;
    let device = DeviceModel::for_arch(arch);
    let mut lines = vec![format!(
        "{}: set `{}` on {}",
        call.problem, set.name, device.name
    )];
    lines.extend(ranking_lines(picker.candidates(), &call.problem, &device));
    Ok(lines)
}

fn ranking_lines(
    candidates: &[pick::Candidate],
    problem: &Problem,
    device: &DeviceModel,
) -> Vec<String> {
    let ranking = pick::rank(candidates, problem, device);
    let mut lines = Vec::new();
    if let Some((_, best)) = ranking.best() {
        lines.push(format!("  model: {}", pick::reasons(best, problem)));
        for (index, other) in &ranking.ranked {
            lines.push(format!(
                "  {} {:.1} us ({:.2}x), bound by {}",
                candidates[*index].name,
                other.seconds * 1e6,
                other.seconds / best.seconds,
                other.bound.name()
            ));
        }
    }
    for (index, why) in &ranking.refused {
        if candidates[*index].layout == problem.layout {
            lines.push(format!("  {} refused: {why}", candidates[*index].name));
        }
    }
    lines
}
