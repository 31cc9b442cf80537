//! Labels in built models (`aclrtCreateLabel`, `aclrtSetLabel`,
//! `aclrtCreateLabelList`, `aclrtSwitchLabelByIndex`, and their destroys).
//!
//! A label marks a place in the tasks of a stream bound to a model being
//! built (`aclmdlRIBindStream`): `aclrtSetLabel` appends a label task there.
//! `aclrtSwitchLabelByIndex` appends a switch task that, when a replay
//! reaches it, reads a `uint32_t` index from device memory and carries on
//! from the indexed label of a label list: the tasks after that label, on
//! the label's stream, run next; the rest of the switching stream's tasks
//! do not. An index past the list's last label picks the last, as CANN's
//! reference says. Model, list and switch each hold the labels they name,
//! so destroying a label or a list leaves a built model whole.
//!
//! As on the device, a label belongs to the context current when it was
//! made, is set once, and labels are counted per process (65535 at most).

use super::host::HostRuntime;
use super::model::Node;
use crate::base::error::{
    Error, Result, ACL_ERROR_RT_INTERNAL_ERROR, ACL_ERROR_RT_LABEL_CONTEXT,
    ACL_ERROR_RT_STREAM_MODEL,
};
use crate::base::ids::{LabelHandle, LabelListHandle};
use crate::registry::StreamKey;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// How many labels a process may have at once (CANN's reference).
pub const MAX_LABELS: usize = 65535;

/// A label (`aclrtLabel`).
pub struct Label {
    /// The context it was made in.
    context: usize,
    /// Set on a stream already (`aclrtSetLabel` refuses a second time).
    set: AtomicBool,
}

/// The labels of a label list (`aclrtLabelList`), in order.
pub type LabelList = Arc<[Arc<Label>]>;

const NOT_A_LABEL: Error = Error::InvalidParam {
    param: "label",
    reason: "It is not a live label (never returned by aclrtCreateLabel, or destroyed)",
};
const NOT_A_LIST: Error = Error::InvalidParam {
    param: "labelList",
    reason: "It is not a live label list (never returned by aclrtCreateLabelList, or destroyed)",
};
const OTHER_CONTEXT: Error = Error::Capture {
    code: ACL_ERROR_RT_LABEL_CONTEXT,
    reason: "The label was created in another context than the current one",
};
const NOT_IN_MODEL: Error = Error::Capture {
    code: ACL_ERROR_RT_STREAM_MODEL,
    reason: "The stream is not bound to a model being built (aclmdlRIBindStream)",
};
const SET_TWICE: Error = Error::Capture {
    code: ACL_ERROR_RT_INTERNAL_ERROR,
    reason: "The label cannot be set repeatedly",
};
const TOO_MANY: Error = Error::Capture {
    code: ACL_ERROR_RT_INTERNAL_ERROR,
    reason: "A process may have at most 65535 labels: destroy some first",
};

impl HostRuntime {
    fn label(&self, handle: usize) -> Result<Arc<Label>> {
        LabelHandle::from_raw(handle)
            .and_then(|h| self.labels.with(h, Arc::clone))
            .ok_or(NOT_A_LABEL)
    }

    /// `aclrtCreateLabel`: a label of the current context.
    pub fn create_label(&self) -> Result<usize> {
        let (context, _) = self.current_context()?;
        if self.labels.len() >= MAX_LABELS {
            return Err(TOO_MANY);
        }
        let label = Arc::new(Label {
            context,
            set: AtomicBool::new(false),
        });
        Ok(self.labels.insert(label)?.get())
    }

    /// `aclrtDestroyLabel`: the handle goes; a model that holds the label
    /// keeps it.
    pub fn destroy_label(&self, label: usize) -> Result<()> {
        let (context, _) = self.current_context()?;
        if self.label(label)?.context != context {
            return Err(OTHER_CONTEXT);
        }
        LabelHandle::from_raw(label)
            .and_then(|h| self.labels.remove(h))
            .map(drop)
            .ok_or(NOT_A_LABEL)
    }

    /// `aclrtSetLabel`: marks the place of the next task on `stream`, a
    /// stream bound to a model being built. A label is set once.
    pub fn set_label(&self, label: usize, stream: Option<StreamKey>) -> Result<()> {
        let (context, _) = self.current_context()?;
        let label = self.label(label)?;
        if label.context != context {
            return Err(OTHER_CONTEXT);
        }
        let (capture, lane) = self.bound(stream).map_err(|_| NOT_IN_MODEL)?;
        if label.set.swap(true, Ordering::AcqRel) {
            return Err(SET_TWICE);
        }
        let pushed = capture.push(lane, Node::Label(Arc::clone(&label)));
        if pushed.is_err() {
            label.set.store(false, Ordering::Release);
        }
        pushed
    }

    /// `aclrtCreateLabelList`: the `labels` (1 to 65535 of them), in order.
    pub fn create_label_list(&self, labels: &[usize]) -> Result<usize> {
        self.current_context()?;
        if labels.is_empty() || labels.len() > MAX_LABELS {
            return Err(Error::InvalidParam {
                param: "num",
                reason: "It must be in (0, 65535]",
            });
        }
        let list: LabelList = labels
            .iter()
            .map(|&l| self.label(l).map_err(|_| Error::InvalidParam {
                param: "labels",
                reason: "An element is not a live label (never returned by aclrtCreateLabel, or destroyed)",
            }))
            .collect::<Result<_>>()?;
        Ok(self.label_lists.insert(list)?.get())
    }

    /// `aclrtDestroyLabelList`: the handle goes; a switch that holds the
    /// list keeps it.
    pub fn destroy_label_list(&self, list: usize) -> Result<()> {
        LabelListHandle::from_raw(list)
            .and_then(|h| self.label_lists.remove(h))
            .map(drop)
            .ok_or(NOT_A_LIST)
    }

    /// `aclrtSwitchLabelByIndex`: on `stream`, bound to a model being
    /// built, a task that reads the `uint32_t` at `index` (device memory)
    /// when it runs and carries on after the label it picks from the first
    /// `max` of `list` (the last of them when the index is past them).
    pub fn switch_label_by_index(
        &self,
        index: *const u8,
        max: u32,
        list: usize,
        stream: Option<StreamKey>,
    ) -> Result<()> {
        self.current_context()?;
        let labels = LabelListHandle::from_raw(list)
            .and_then(|h| self.label_lists.with(h, Arc::clone))
            .ok_or(NOT_A_LIST)?;
        if max == 0 || max as usize > labels.len() {
            return Err(Error::InvalidParam {
                param: "maxValue",
                reason: "It must be the number of labels of the list to switch among: from 1 to the list's length",
            });
        }
        self.check_device_range(index, std::mem::size_of::<u32>(), "ptr", true)?;
        let (capture, lane) = self.bound(stream).map_err(|_| NOT_IN_MODEL)?;
        capture.push(lane, Node::LabelSwitch { index, max, labels })
    }

    /// The number of live labels (tests).
    pub fn live_labels(&self) -> usize {
        self.labels.len()
    }
}
