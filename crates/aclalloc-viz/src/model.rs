//! From a snapshot (this library's, or PyTorch's `_snapshot()`) to the
//! page's data: per device, allocations and segments as intervals over the
//! trace's events, and the segments at the end with their blocks. Paired
//! here in exact 64-bit arithmetic: addresses reach the script as hex
//! strings, offsets and sizes as numbers (always below 2^53).

use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};

/// Why a snapshot cannot be drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VizError(pub String);

impl std::fmt::Display for VizError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for VizError {}

/// A number written as an integer, a decimal string or a "0x..." string.
pub fn number(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => {
            let s = s.trim();
            match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse().ok(),
            }
        }
        _ => None,
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

/// Interns stream handles as small indices.
#[derive(Default)]
struct Streams {
    index: HashMap<u64, usize>,
    names: Vec<String>,
}

impl Streams {
    fn id(&mut self, handle: u64) -> usize {
        let names = &mut self.names;
        *self.index.entry(handle).or_insert_with(|| {
            names.push(hex(handle));
            names.len() - 1
        })
    }
}

struct Interval {
    addr: u64,
    size: u64,
    requested: u64,
    stream: usize,
    start: i64,
    end: i64,
    kind: String,
    /// Index into the device's stacks (-1: none recorded).
    stack: i64,
}

impl Interval {
    /// One that began before the trace and is still open at its end (or
    /// whose start and end are set after).
    fn before_trace(addr: u64, size: u64, requested: u64, stream: usize) -> Self {
        Interval {
            addr,
            size,
            requested,
            stream,
            start: -1,
            end: -1,
            kind: String::new(),
            stack: -1,
        }
    }
}

/// One device's data for the page.
struct DeviceModel {
    device: i64,
    times: Vec<u64>,
    allocs: Vec<Interval>,
    segs: Vec<Interval>,
    /// (event index, bytes requested, bytes the allocator could still take)
    ooms: Vec<(usize, u64, u64)>,
    /// (segment, offset, size, requested, state, allocation or -1)
    end_blocks: Vec<(usize, u64, u64, u64, String, i64)>,
    streams: Streams,
    /// Allocating stacks, one frame a line (`name at file:line`), interned.
    stacks: Vec<String>,
    stack_index: HashMap<String, usize>,
}

/// What a snapshot the page can draw comes from.
pub(crate) const SOURCES: &str =
    "give a file written by aclallocPoolSnapshot, 'aclalloc run --json' or torch's _snapshot()";

/// Builds the page's data from a parsed snapshot.
pub fn build(snapshot: &Value) -> Result<Value, VizError> {
    let Some(top) = snapshot.as_object() else {
        return Err(VizError(format!(
            "the snapshot is not a JSON object; {SOURCES}"
        )));
    };
    let segments = top.get("segments").and_then(Value::as_array);
    let traces = top.get("device_traces").and_then(Value::as_array);
    if segments.is_none() && traces.is_none() {
        return Err(VizError(format!(
            "the snapshot has neither \"segments\" nor \"device_traces\"; {SOURCES}"
        )));
    }
    let default_device = top.get("device").and_then(Value::as_i64).unwrap_or(0);
    let device_of = |s: &Value| {
        s.get("device")
            .and_then(Value::as_i64)
            .unwrap_or(default_device)
    };
    let empty = Vec::new();
    let segments = segments.unwrap_or(&empty);
    let traces = traces.unwrap_or(&empty);
    let mut devices: Vec<i64> = segments.iter().map(device_of).collect();
    devices.extend(
        traces
            .iter()
            .enumerate()
            .filter(|(_, t)| t.as_array().is_some_and(|a| !a.is_empty()))
            .map(|(d, _)| d as i64),
    );
    devices.sort_unstable();
    devices.dedup();
    if devices.is_empty() {
        devices.push(default_device);
    }
    let mut out = Vec::new();
    for &d in &devices {
        let trace = usize::try_from(d)
            .ok()
            .and_then(|i| traces.get(i))
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let segs: Vec<&Value> = segments.iter().filter(|s| device_of(s) == d).collect();
        out.push(device_model(d, trace, &segs).to_json());
    }
    let history = top.get("history").cloned().unwrap_or(Value::Null);
    let faults: Vec<Value> = top
        .get("events")
        .and_then(Value::as_array)
        .map(|events| {
            events
                .iter()
                .filter(|e| e.get("kind").is_some())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    Ok(json!({
        "version": 1,
        "snapshot_version": top.get("version").cloned().unwrap_or(Value::Null),
        "pid": top.get("pid").cloned().unwrap_or(Value::Null),
        "history": history,
        "devices": out,
        "faults": faults,
        "stream_ordered_pools": top.get("stream_ordered_pools").cloned().unwrap_or(json!([])),
    }))
}

fn device_model(device: i64, trace: &[Value], segments: &[&Value]) -> DeviceModel {
    let mut m = DeviceModel {
        device,
        times: Vec::new(),
        allocs: Vec::new(),
        segs: Vec::new(),
        ooms: Vec::new(),
        end_blocks: Vec::new(),
        streams: Streams::default(),
        stacks: Vec::new(),
        stack_index: HashMap::new(),
    };
    let mut open_allocs: HashMap<u64, usize> = HashMap::new();
    let mut open_segs: HashMap<u64, usize> = HashMap::new();
    let t0 = trace
        .iter()
        .filter_map(|e| e.get("time_us").and_then(number))
        .min()
        .unwrap_or(0);
    let mut last_t = 0;
    for e in trace {
        let action = e.get("action").and_then(Value::as_str).unwrap_or("");
        let addr = e.get("addr").and_then(number).unwrap_or(0);
        let size = e.get("size").and_then(number).unwrap_or(0);
        let block = e.get("block_size").and_then(number).unwrap_or(size);
        let stream = m.streams.id(e.get("stream").and_then(number).unwrap_or(0));
        let index = m.times.len() as i64;
        let t = e.get("time_us").and_then(number).map_or(last_t, |t| t - t0);
        let stack = match action {
            "alloc" => m.stack_of(e.get("frames")),
            _ => -1,
        };
        // (intervals, the open ones by address, their size, opens one)
        let target = match action {
            "alloc" => Some((&mut m.allocs, &mut open_allocs, block, true)),
            "free_completed" | "free" => Some((&mut m.allocs, &mut open_allocs, block, false)),
            "segment_alloc" | "segment_map" => Some((&mut m.segs, &mut open_segs, size, true)),
            "segment_free" | "segment_unmap" => Some((&mut m.segs, &mut open_segs, size, false)),
            "oom" => {
                m.ooms.push((index as usize, size, addr));
                None
            }
            _ => continue, // free_requested, snapshot, ...: not drawn
        };
        if let Some((list, open, bytes, opens)) = target {
            let mut interval = Interval::before_trace(addr, bytes, size, stream);
            if opens {
                if let Some(previous) = open.insert(addr, list.len()) {
                    list[previous].end = index; // a free the trace lost
                }
                interval.start = index;
                interval.stack = stack;
                list.push(interval);
            } else {
                match open.remove(&addr) {
                    Some(i) => list[i].end = index,
                    None => list.push(Interval {
                        end: index,
                        ..interval
                    }),
                }
            }
        }
        last_t = t;
        m.times.push(t);
    }
    // The segments at the end: those the trace left open, and those it
    // never saw (made before recording started).
    for s in segments {
        let addr = s.get("address").and_then(number).unwrap_or(0);
        let size = s.get("total_size").and_then(number).unwrap_or(0);
        let stream = m.streams.id(s.get("stream").and_then(number).unwrap_or(0));
        let kind = s
            .get("segment_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let seg = open_segs.remove(&addr).unwrap_or_else(|| {
            m.segs
                .push(Interval::before_trace(addr, size, size, stream));
            m.segs.len() - 1
        });
        m.segs[seg].kind = kind;
        let mut at = addr;
        for b in s
            .get("blocks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let b_addr = b.get("address").and_then(number).unwrap_or(at);
            let b_size = b.get("size").and_then(number).unwrap_or(0);
            let requested = b.get("requested_size").and_then(number).unwrap_or(0);
            let state = b
                .get("state")
                .and_then(Value::as_str)
                .unwrap_or("inactive")
                .to_string();
            at = b_addr + b_size;
            let live = state.starts_with("active");
            let alloc = if live {
                let a = open_allocs.remove(&b_addr).unwrap_or_else(|| {
                    m.allocs
                        .push(Interval::before_trace(b_addr, b_size, requested, stream));
                    m.allocs.len() - 1
                });
                if m.allocs[a].stack < 0 {
                    m.allocs[a].stack = m.stack_of(b.get("frames"));
                }
                a as i64
            } else {
                -1
            };
            m.end_blocks.push((
                seg,
                b_addr.saturating_sub(addr),
                b_size,
                requested,
                state,
                alloc,
            ));
        }
    }
    m
}

impl DeviceModel {
    /// The index of a snapshot's `frames` (PyTorch's shape) among the
    /// device's stacks; -1 without frames.
    fn stack_of(&mut self, frames: Option<&Value>) -> i64 {
        let Some(frames) = frames.and_then(Value::as_array).filter(|f| !f.is_empty()) else {
            return -1;
        };
        let line = |f: &Value| {
            let name = f.get("name").and_then(Value::as_str).unwrap_or("??");
            let file = f.get("filename").and_then(Value::as_str).unwrap_or("");
            let file = file.rsplit('/').next().unwrap_or(file);
            match f.get("line").and_then(number).unwrap_or(0) {
                0 => format!("{name} ({file})"),
                n => format!("{name} at {file}:{n}"),
            }
        };
        let text: Vec<String> = frames.iter().map(line).collect();
        let text = text.join("\n");
        let stacks = &mut self.stacks;
        *self.stack_index.entry(text).or_insert_with_key(|text| {
            stacks.push(text.clone());
            stacks.len() - 1
        }) as i64
    }

    /// The segment each allocation lies in, and its offset there (-1, 0
    /// when none is known: a trace that lost its segment events).
    fn placement(&self) -> (Vec<i64>, Vec<u64>) {
        let mut by_addr: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, s) in self.segs.iter().enumerate() {
            by_addr.entry(s.addr).or_default().push(i);
        }
        self.allocs
            .iter()
            .map(|a| {
                // The segment live right after the allocation (or at the
                // start, for one made before the trace).
                let when = a.start;
                let found = by_addr
                    .range(..=a.addr)
                    .rev()
                    .take(64)
                    .flat_map(|(_, segs)| segs.iter().rev())
                    .find(|&&s| {
                        let seg = &self.segs[s];
                        a.addr < seg.addr + seg.size.max(1)
                            && seg.start <= when
                            && (seg.end < 0 || seg.end > when)
                    });
                match found {
                    Some(&s) => (s as i64, a.addr - self.segs[s].addr),
                    None => (-1, 0),
                }
            })
            .unzip()
    }

    fn to_json(&self) -> Value {
        let (seg, off) = self.placement();
        let column = |f: &dyn Fn(&Interval) -> Value, list: &[Interval]| -> Value {
            Value::Array(list.iter().map(f).collect())
        };
        let intervals = |list: &[Interval]| {
            let mut o = Map::new();
            o.insert("addr".into(), column(&|a| hex(a.addr).into(), list));
            o.insert("size".into(), column(&|a| a.size.into(), list));
            o.insert("req".into(), column(&|a| a.requested.into(), list));
            o.insert("stream".into(), column(&|a| a.stream.into(), list));
            o.insert("start".into(), column(&|a| a.start.into(), list));
            o.insert("end".into(), column(&|a| a.end.into(), list));
            o
        };
        let mut allocs = intervals(&self.allocs);
        allocs.insert("stack".into(), column(&|a| a.stack.into(), &self.allocs));
        allocs.insert("seg".into(), json!(seg));
        allocs.insert("off".into(), json!(off));
        let mut segs = intervals(&self.segs);
        segs.insert(
            "type".into(),
            column(&|s| s.kind.clone().into(), &self.segs),
        );
        json!({
            "device": self.device,
            "streams": self.streams.names,
            "t": self.times,
            "allocs": allocs,
            "segs": segs,
            "ooms": self.ooms,
            "end_blocks": self.end_blocks,
            "stacks": self.stacks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_as_integers_or_hex_or_decimal_strings() {
        assert_eq!(number(&json!(12)), Some(12));
        assert_eq!(number(&json!("0x10")), Some(16));
        assert_eq!(number(&json!("0xffffffffffffffff")), Some(u64::MAX));
        assert_eq!(number(&json!("42")), Some(42));
        assert_eq!(number(&json!(null)), None);
        assert_eq!(number(&json!("zz")), None);
    }

    #[test]
    fn pairs_allocations_with_their_frees_and_places_them_in_segments() {
        // PyTorch's shape: integer addresses, no block_size.
        let snapshot = json!({
            "segments": [{"device": 0, "address": 4096, "total_size": 2048, "stream": 7,
                "segment_type": "small", "blocks": [
                    {"size": 512, "requested_size": 500, "state": "active_allocated"},
                    {"size": 1536, "requested_size": 0, "state": "inactive"}]}],
            "device_traces": [[
                {"action": "segment_alloc", "addr": 4096, "size": 2048, "stream": 7, "time_us": 100},
                {"action": "alloc", "addr": 4096, "size": 500, "stream": 7, "time_us": 101},
                {"action": "alloc", "addr": 4608, "size": 100, "stream": 7, "time_us": 102},
                {"action": "free_requested", "addr": 4608, "size": 100, "stream": 7, "time_us": 103},
                {"action": "free_completed", "addr": 4608, "size": 100, "stream": 7, "time_us": 103},
                {"action": "free_completed", "addr": 9999, "size": 64, "stream": 7, "time_us": 104}
            ]]
        });
        let page = build(&snapshot).unwrap();
        let d = &page["devices"][0];
        assert_eq!(
            d["t"],
            json!([0, 1, 2, 3, 4]),
            "free_requested is not drawn"
        );
        assert_eq!(d["streams"], json!(["0x7"]));
        let a = &d["allocs"];
        assert_eq!(a["addr"], json!(["0x1000", "0x1200", "0x270f"]));
        assert_eq!(
            a["start"],
            json!([1, 2, -1]),
            "a free with no alloc was live before"
        );
        assert_eq!(a["end"], json!([-1, 3, 4]));
        assert_eq!(a["seg"], json!([0, 0, -1]));
        assert_eq!(a["off"], json!([0, 512, 0]));
        assert_eq!(d["segs"]["type"], json!(["small"]));
        assert_eq!(
            d["end_blocks"][0],
            json!([0, 0, 512, 500, "active_allocated", 0])
        );
        assert_eq!(d["end_blocks"][1], json!([0, 512, 1536, 0, "inactive", -1]));
    }

    #[test]
    fn allocations_keep_their_stack_from_the_trace_or_their_block() {
        let frames = json!([{"filename": "/src/model.py", "line": 7, "name": "load"},
                            {"filename": "libx.so", "line": 0, "name": "libx.so+0x10"}]);
        let snapshot = json!({
            "segments": [{"address": 4096, "total_size": 1024, "stream": 1, "blocks": [
                {"address": 4096, "size": 512, "requested_size": 512, "state": "active_allocated"},
                {"address": 4608, "size": 512, "requested_size": 512, "state": "active_allocated",
                 "frames": frames}]}],
            "device_traces": [[
                {"action": "alloc", "addr": 4096, "size": 512, "stream": 1, "frames": frames},
                {"action": "alloc", "addr": 8192, "size": 64, "stream": 1}]]
        });
        let d = &build(&snapshot).unwrap()["devices"][0];
        assert_eq!(
            d["stacks"],
            json!(["load at model.py:7\nlibx.so+0x10 (libx.so)"])
        );
        assert_eq!(d["allocs"]["stack"], json!([0, -1, 0]));
    }

    #[test]
    fn refuses_what_is_not_a_snapshot() {
        assert!(build(&json!([1, 2])).is_err());
        let e = build(&json!({"foo": 1})).unwrap_err();
        assert!(
            e.0.contains("neither \"segments\" nor \"device_traces\""),
            "{e}"
        );
    }
}
