//! Launches captured in a CUDA graph.
//!
//! Every launch ([`GemmKernel::launch`](crate::GemmKernel::launch) and the launches built on
//! it, [`Matmul::run`](crate::Matmul::run) and its kin) may be captured on a stream of one's
//! own and replayed, bitwise equal to the eager launch, under three rules:
//!
//! - **Buffers without events.** cudarc tracks each buffer's uses with events once a context
//!   has a second stream (its default); every use then waits on the buffer's last write and
//!   records a read, and a wait on an event recorded outside a capture invalidates the
//!   capture. Call `unsafe { ctx.disable_event_tracking() }` before allocating the buffers
//!   you capture with, and order your streams yourself. A launch on a capturing stream while
//!   the context tracks events is refused with [`Error::CaptureNeedsUntrackedBuffers`]
//!   before any buffer is touched: nothing is launched and the capture goes on. (cudarc
//!   keeps a buffer's events private, so the runtime refuses whenever the context tracks,
//!   including for buffers allocated while tracking was off.)
//! - **A stream of one's own.** The legacy default stream (`ctx.default_stream()`, the null
//!   stream) cannot be captured ([`begin_capture`] refuses it), and a launch on it while a
//!   blocking stream captures would invalidate that capture
//!   ([`Error::LegacyStreamCapture`]). `ctx.new_stream()` gives a non-blocking stream.
//! - **Kernels loaded first.** Loading compiles the PTX and allocates a stream-K kernel's
//!   workspace, which a capture cannot hold: a `Matmul` whose first run of a problem would
//!   load its kernel during a capture refuses with [`Error::CaptureLoadsKernel`]. Run the
//!   problem once, or call [`Matmul::kernel_for`](crate::Matmul::kernel_for), before
//!   capturing.
//!
//! A launch allocates, copies and synchronizes nothing (tensor maps are encoded on the host
//! and travel in the kernel's parameters), so the graph holds kernel nodes only; a
//! `Matmul` run that stages operands in 128-byte lines (`Picked::staged`) adds its scratch's
//! stream-ordered allocation and free and the copy kernels around its product (load the copy
//! with the problem's first run or `warm_up`, as a kernel). Cooperative
//! launches (stream-K kernels) and cluster launches are captured with their launch
//! attributes: both are valid for graph kernel nodes. A stream-K kernel's workspace is its
//! own, allocated at load: replays of a graph that holds it must not overlap other launches
//! of the same kernel on other streams.

use crate::error::{DriverContext, Error};
use cudarc::driver::sys::{self, CUstreamCaptureMode, CUstreamCaptureStatus};
use cudarc::driver::CudaStream;

/// A stream's part in a graph capture, as a launch on it sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamCapture {
    /// Not capturing: launches run eagerly.
    Idle,
    /// Capturing: launches become graph nodes.
    Active,
    /// Its capture was invalidated by an earlier call; it lasts until the capture ends.
    Invalidated,
    /// The legacy default stream while a blocking stream captures: work on it would
    /// invalidate that capture.
    LegacyBesideCapture,
}

impl StreamCapture {
    /// `stream`'s part in a capture now (`cuStreamIsCapturing`).
    pub fn of(stream: &CudaStream) -> Result<StreamCapture, Error> {
        match stream.capture_status() {
            Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE) => Ok(StreamCapture::Idle),
            Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE) => Ok(StreamCapture::Active),
            Ok(CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_INVALIDATED) => {
                Ok(StreamCapture::Invalidated)
            }
            Err(error) if error.0 == sys::CUresult::CUDA_ERROR_STREAM_CAPTURE_IMPLICIT => {
                Ok(StreamCapture::LegacyBesideCapture)
            }
            Err(error) => Err(error).during(|| "asking whether the stream captures".to_string()),
        }
    }

    /// Whether work on the stream would join a capture (an active or an invalidated one).
    pub fn is_capturing(self) -> bool {
        matches!(self, StreamCapture::Active | StreamCapture::Invalidated)
    }
}

/// Whether a launch may go on a stream in `capture`, in a context that does
/// (`tracking_events`: `ctx.is_managing_stream_synchronization()`) or does not track buffer
/// uses with events; `what` names the launch in the error. cudarc waits on and records a
/// buffer's events exactly when its context tracks them, and a wait on an event recorded
/// outside the capture invalidates it.
pub(crate) fn check_capture(
    capture: StreamCapture,
    tracking_events: bool,
    what: impl FnOnce() -> String,
) -> Result<(), Error> {
    match capture {
        StreamCapture::LegacyBesideCapture => Err(Error::LegacyStreamCapture { what: what() }),
        StreamCapture::Active | StreamCapture::Invalidated if tracking_events => {
            Err(Error::CaptureNeedsUntrackedBuffers { what: what() })
        }
        _ => Ok(()),
    }
}

/// [`check_capture`] for a launch on `stream`, asking the driver only where its answer could
/// refuse the launch: in a context that tracks events, or on the legacy stream. A launch on a
/// stream of one's own in an untracked context (the serving case) skips the query.
pub(crate) fn check_capture_of(
    stream: &CudaStream,
    tracking_events: bool,
    what: impl FnOnce() -> String,
) -> Result<(), Error> {
    if !tracking_events && !is_legacy_stream(stream) {
        return Ok(());
    }
    check_capture(StreamCapture::of(stream)?, tracking_events, what)
}

/// Whether `stream` is the legacy default stream (`ctx.default_stream()`: the null handle,
/// or `CU_STREAM_LEGACY`).
pub fn is_legacy_stream(stream: &CudaStream) -> bool {
    let handle = stream.cu_stream() as usize;
    handle == 0 || handle == 1
}

/// Begins capturing `stream` into a CUDA graph (`stream.begin_capture(mode)`), first
/// refusing what would make the capture fail: the legacy default stream
/// ([`Error::LegacyStreamCapture`]) and a context that tracks buffer uses with events
/// ([`Error::CaptureNeedsUntrackedBuffers`]). End it with cudarc's `stream.end_capture`,
/// which instantiates the graph.
pub fn begin_capture(stream: &CudaStream, mode: CUstreamCaptureMode) -> Result<(), Error> {
    let what = || "beginning a CUDA graph capture".to_string();
    if is_legacy_stream(stream) {
        return Err(Error::LegacyStreamCapture { what: what() });
    }
    check_capture(
        StreamCapture::Active,
        stream.context().is_managing_stream_synchronization(),
        what,
    )?;
    stream.begin_capture(mode).during(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> String {
        "launching `k`".to_string()
    }

    #[test]
    fn a_capturing_stream_refuses_launches_while_the_context_tracks_events() {
        for capture in [StreamCapture::Active, StreamCapture::Invalidated] {
            let error = check_capture(capture, true, launch).unwrap_err();
            assert!(
                matches!(&error, Error::CaptureNeedsUntrackedBuffers { what } if what == "launching `k`"),
                "{error}"
            );
            assert!(
                error.to_string().contains("disable_event_tracking()"),
                "{error}"
            );
            assert!(check_capture(capture, false, launch).is_ok());
        }
    }

    #[test]
    fn an_untracked_launch_off_the_legacy_stream_is_never_refused() {
        // What lets `check_capture_of` skip asking the driver: only the legacy stream can be
        // `LegacyBesideCapture`, and every other state passes without tracking.
        for capture in [
            StreamCapture::Idle,
            StreamCapture::Active,
            StreamCapture::Invalidated,
        ] {
            assert!(check_capture(capture, false, launch).is_ok());
        }
    }

    #[test]
    fn an_idle_stream_launches_whatever_the_tracking() {
        for tracking in [false, true] {
            assert!(check_capture(StreamCapture::Idle, tracking, launch).is_ok());
        }
    }

    #[test]
    fn the_legacy_stream_beside_a_capture_is_refused() {
        for tracking in [false, true] {
            let error =
                check_capture(StreamCapture::LegacyBesideCapture, tracking, launch).unwrap_err();
            assert!(
                matches!(error, Error::LegacyStreamCapture { .. }),
                "{error}"
            );
            assert!(error.to_string().contains("new_stream()"), "{error}");
        }
    }

    #[test]
    fn only_active_and_invalidated_captures_join_the_launch() {
        assert!(StreamCapture::Active.is_capturing());
        assert!(StreamCapture::Invalidated.is_capturing());
        assert!(!StreamCapture::Idle.is_capturing());
        assert!(!StreamCapture::LegacyBesideCapture.is_capturing());
    }
}
