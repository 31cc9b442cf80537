//! `aclrtSetStreamAttribute` / `aclrtGetStreamAttribute`: a stream's failure
//! mode (the same as `aclrtSetStreamFailureMode`) and priority, and the
//! switches a device would act on (overflow check, cache-op info) and the
//! user's tag, which the host keeps and reports back.

use super::host::HostRuntime;
use crate::base::error::{Error, Result};
use crate::registry::StreamKey;
use parking_lot::Mutex;
use std::collections::HashMap;

/// `aclrtStreamAttr` values.
pub(crate) const ATTR_FAILURE_MODE: i32 = 1;
pub(crate) const ATTR_FLOAT_OVERFLOW_CHECK: i32 = 2;
pub(crate) const ATTR_USER_CUSTOM_TAG: i32 = 3;
pub(crate) const ATTR_CACHE_OP_INFO: i32 = 4;
pub(crate) const ATTR_PRIORITY: i32 = 5;

/// What was set per stream: (stream key, attribute) → value. Stream keys
/// are never reused, so an entry of a destroyed stream is never read.
static KEPT: Mutex<Option<HashMap<(usize, i32), u64>>> = Mutex::new(None);

fn invalid(param: &'static str, reason: &'static str) -> Error {
    Error::InvalidParam { param, reason }
}

impl HostRuntime {
    /// `aclrtSetStreamAttribute`: `value` as the union member of `attr`.
    pub fn set_stream_attribute(
        &self,
        stream: Option<StreamKey>,
        attr: i32,
        value: u64,
    ) -> Result<()> {
        let (key, s) = self.resolve_stream(stream)?;
        match attr {
            ATTR_FAILURE_MODE if stream.is_none() => {
                return Err(invalid(
                    "stream",
                    "The failure mode of a context's default stream cannot be set",
                ))
            }
            ATTR_FAILURE_MODE => return self.set_stream_failure_mode(Some(key), value),
            ATTR_FLOAT_OVERFLOW_CHECK | ATTR_CACHE_OP_INFO if value > 1 => {
                return Err(invalid("value", "The switch must be 0 (off) or 1 (on)"))
            }
            ATTR_FLOAT_OVERFLOW_CHECK | ATTR_CACHE_OP_INFO | ATTR_USER_CUSTOM_TAG => {}
            ATTR_PRIORITY => {
                return Err(invalid(
                    "stmAttrType",
                    "A stream's priority is fixed when it is created (aclrtCreateStreamWithConfig)",
                ))
            }
            _ => return Err(invalid("stmAttrType", "It is not an aclrtStreamAttr value")),
        }
        drop(s);
        KEPT.lock()
            .get_or_insert_with(HashMap::new)
            .insert((key.get().get(), attr), value);
        Ok(())
    }

    /// `aclrtGetStreamAttribute`: the value of `attr` (0 for a switch or
    /// tag never set).
    pub fn stream_attribute(&self, stream: Option<StreamKey>, attr: i32) -> Result<u64> {
        let (key, s) = self.resolve_stream(stream)?;
        match attr {
            ATTR_FAILURE_MODE => Ok(u64::from(s.stops_on_failure())),
            ATTR_PRIORITY => self.stream_priority(Some(key)).map(u64::from),
            ATTR_FLOAT_OVERFLOW_CHECK | ATTR_CACHE_OP_INFO | ATTR_USER_CUSTOM_TAG => {
                let kept = KEPT.lock();
                let value = kept.as_ref().and_then(|m| m.get(&(key.get().get(), attr)));
                Ok(value.copied().unwrap_or(0))
            }
            _ => Err(invalid("stmAttrType", "It is not an aclrtStreamAttr value")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::tests::runtime;

    #[test]
    fn attributes_are_kept_per_stream_and_checked() {
        let rt = runtime(1, 1 << 20);
        rt.set_device(0).unwrap();
        let (a, b) = (
            rt.create_stream(3, 0).unwrap(),
            rt.create_stream(0, 0).unwrap(),
        );
        rt.set_stream_attribute(Some(a), ATTR_USER_CUSTOM_TAG, 77)
            .unwrap();
        rt.set_stream_attribute(Some(a), ATTR_FAILURE_MODE, 1)
            .unwrap();
        assert_eq!(rt.stream_attribute(Some(a), ATTR_USER_CUSTOM_TAG), Ok(77));
        assert_eq!(rt.stream_attribute(Some(b), ATTR_USER_CUSTOM_TAG), Ok(0));
        assert_eq!(rt.stream_attribute(Some(a), ATTR_FAILURE_MODE), Ok(1));
        assert_eq!(rt.stream_attribute(Some(b), ATTR_FAILURE_MODE), Ok(0));
        assert_eq!(rt.stream_attribute(Some(a), ATTR_PRIORITY), Ok(3));
        assert!(rt.set_stream_attribute(None, ATTR_FAILURE_MODE, 1).is_err());
        assert!(rt
            .set_stream_attribute(Some(a), ATTR_FAILURE_MODE, 2)
            .is_err());
        assert!(rt
            .set_stream_attribute(Some(a), ATTR_FLOAT_OVERFLOW_CHECK, 2)
            .is_err());
        assert!(rt.set_stream_attribute(Some(a), ATTR_PRIORITY, 1).is_err());
        assert!(rt.set_stream_attribute(Some(a), 9, 0).is_err());
        assert!(rt.stream_attribute(Some(a), 0).is_err());
        rt.destroy_stream(a, true).unwrap();
        assert!(rt.stream_attribute(Some(a), ATTR_USER_CUSTOM_TAG).is_err());
    }
}
