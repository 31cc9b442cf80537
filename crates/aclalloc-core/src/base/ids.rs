//! The ids the layers above share: a stream as the allocator API sees it,
//! and the handle of every kind of object handed to C.

use std::ffi::c_void;
use std::num::NonZeroUsize;

/// A stream, identified by its (non-NULL) handle. The allocator API treats
/// streams as opaque: any non-NULL pointer is one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamKey(NonZeroUsize);

impl StreamKey {
    pub(crate) fn from_value(value: NonZeroUsize) -> Self {
        StreamKey(value)
    }

    /// The key of a non-NULL stream handle.
    pub fn from_ptr(stream: *mut c_void) -> Option<Self> {
        NonZeroUsize::new(stream as usize).map(StreamKey)
    }

    /// The stream handle.
    pub fn as_ptr(self) -> *mut c_void {
        self.0.get() as *mut c_void
    }

    /// The handle as a number.
    pub fn get(self) -> NonZeroUsize {
        self.0
    }
}

use super::handles::{handle_kind, tags};

handle_kind!(
    /// The handle of a descriptor, as `aclrtAllocatorCreateDesc` returned it.
    DescriptorHandle,
    tags::DESCRIPTOR
);
handle_kind!(
    /// The handle of a caching pool or of one of its stream views (`aclallocPool`).
    PoolHandle,
    tags::POOL
);
handle_kind!(
    /// The handle of a pluggable allocator (`aclallocPluggable`).
    PluggableHandle,
    tags::PLUGGABLE
);
handle_kind!(
    /// The handle of a host-runtime stream (`aclrtStream`).
    StreamHandle,
    tags::STREAM
);
handle_kind!(
    /// The handle of a host-runtime context (`aclrtContext`).
    ContextHandle,
    tags::CONTEXT
);
handle_kind!(
    /// The handle of host-runtime physical memory (`aclrtDrvMemHandle`).
    PhysicalHandle,
    tags::PHYSICAL
);
handle_kind!(
    /// The handle of a host-runtime event (`aclrtEvent`).
    EventHandle,
    tags::EVENT
);
handle_kind!(
    /// The handle of a memory pool of the default allocator (`aclallocMemPool`).
    MemPoolHandle,
    tags::MEM_POOL
);
handle_kind!(
    /// The handle of a kernel binary the host runtime loaded (`aclrtBinHandle`).
    BinaryHandle,
    tags::BINARY
);
handle_kind!(
    /// The handle of a kernel function of a loaded binary (`aclrtFuncHandle`).
    FunctionHandle,
    tags::FUNCTION
);
handle_kind!(
    /// The handle of a kernel argument list (`aclrtArgsHandle`).
    KernelArgsHandle,
    tags::KERNEL_ARGS
);
handle_kind!(
    /// The handle of one argument of a kernel argument list (`aclrtParamHandle`).
    KernelParamHandle,
    tags::KERNEL_PARAM
);
handle_kind!(
    /// The handle of a host-runtime model running instance (`aclmdlRI`).
    ModelHandle,
    tags::MODEL
);
handle_kind!(
    /// The handle of an updatable task group of a captured model (`aclrtTaskGrp`).
    TaskGroupHandle,
    tags::TASK_GROUP
);
handle_kind!(
    /// The handle of a condition of a captured model (`aclmdlRICondHandle`).
    ConditionHandle,
    tags::CONDITION
);
handle_kind!(
    /// The handle of a data buffer (`aclDataBuffer`).
    DataBufferHandle,
    tags::DATA_BUFFER
);
handle_kind!(
    /// The handle of physical memory made inside a tagged region
    /// (`aclrtDrvMemHandle`, from `aclrtMallocPhysical`).
    RegionPhysicalHandle,
    tags::REGION_PHYSICAL
);
handle_kind!(
    /// The handle of a label of a built model (`aclrtLabel`).
    LabelHandle,
    tags::LABEL
);
handle_kind!(
    /// The handle of a label list (`aclrtLabelList`).
    LabelListHandle,
    tags::LABEL_LIST
);
