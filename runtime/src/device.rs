//! Opening a device and describing it: what the picker's device model and the tuning cache's
//! key are read from.

use crate::error::{DriverContext, Error};
use cudarc::driver::sys::{self, CUdevice_attribute};
use cudarc::driver::CudaContext;
use std::sync::{Arc, OnceLock};

/// Whether this machine has a CUDA driver library at all. Asked once per process: cudarc's
/// answer opens (`dlopen`) every file name libcuda might have, which costs microseconds a
/// call where the first names are absent, and a driver neither comes nor goes while a process
/// runs.
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open libcuda.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

/// The primary context of device `ordinal`, or [`Error::NoDriver`] where there is no driver
/// (cudarc would panic instead).
pub fn open_context(ordinal: usize) -> Result<Arc<CudaContext>, Error> {
    if !driver_present() {
        return Err(Error::NoDriver);
    }
    CudaContext::new(ordinal).during(|| format!("opening CUDA device {ordinal}"))
}

/// The device as the runtime reads it: [`Matmul`](crate::Matmul) takes its device model
/// ([`device_model`](crate::device_model)) and its tuning-cache key
/// ([`device_key`](crate::device_key)) from these numbers; benchmark reports record them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    pub name: String,
    /// `major.minor` of the CUDA version the driver supports, e.g. `13.0`.
    pub driver_version: String,
    pub compute_capability: String,
    pub multiprocessors: u32,
    /// Peak SM clock the device reports, in MHz (`None` where the driver no longer says).
    pub sm_clock_mhz: Option<u32>,
    pub memory_clock_mhz: Option<u32>,
    pub l2_cache_bytes: u32,
}

impl DeviceInfo {
    /// The compute capability as `major * 10 + minor` (0 if the text is not `major.minor`).
    pub fn compute_capability_number(&self) -> u32 {
        let mut parts = self.compute_capability.split('.');
        let mut next = || {
            parts
                .next()
                .and_then(|p| p.parse::<u32>().ok())
                .unwrap_or(0)
        };
        let major = next();
        major * 10 + next()
    }

    pub fn query(ctx: &Arc<CudaContext>) -> Result<DeviceInfo, Error> {
        let name = ctx
            .name()
            .during(|| "reading the device name".to_string())?;
        let mut version = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut version) }
            .result()
            .during(|| "reading the driver version".to_string())?;
        let (major, minor) = ctx
            .compute_capability()
            .during(|| "reading the compute capability".to_string())?;
        let attribute = |which| {
            ctx.attribute(which)
                .ok()
                .and_then(|v| u32::try_from(v).ok())
        };
        let mhz = |which| {
            attribute(which)
                .filter(|&khz| khz > 0)
                .map(|khz| khz / 1000)
        };
        Ok(DeviceInfo {
            name,
            driver_version: format!("{}.{}", version / 1000, (version % 1000) / 10),
            compute_capability: format!("{major}.{minor}"),
            multiprocessors: attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .unwrap_or(0),
            sm_clock_mhz: mhz(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            memory_clock_mhz: mhz(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            l2_cache_bytes: attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
                .unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_a_context_reports_a_missing_driver_instead_of_panicking() {
        let result = open_context(0);
        if driver_present() {
            // A driver without a usable GPU still answers with an error, not a panic.
            assert!(!matches!(result, Err(Error::NoDriver)));
        } else {
            assert!(matches!(result, Err(Error::NoDriver)), "{result:?}");
        }
    }
}
