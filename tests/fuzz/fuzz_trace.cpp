// Expert traces (`k3host sim`, cache.future of the belady policy), through read_trace_header
// and read_trace on a file, then what sim does first with one: require_trace_of_run against
// the header it read.
//
// Input: one mode byte, then the file. Mode bit 0 set: the harness repairs the record
// count and the XXH64 of the records (bytes 56..72) from the file's length and bytes, so
// that mutations reach the record checks instead of stopping at the checksum. Oracle: the
// header read alone equals read_trace's; every record is inside the geometry; the first
// record starts a group and a group never spans layers; a trace accepted writes and reads
// back to the same records.
#include <cstring>

#include <xxhash.h>

#include <k3/trace.hpp>

#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string file(k3::fuzz::as_text(data + 1, size - 1));
  if ((data[0] & 1) != 0 && file.size() >= k3::kTraceHeaderBytes) {
    const std::uint64_t body = file.size() - k3::kTraceHeaderBytes;
    const std::uint64_t count = body / k3::kTraceRecordBytes;
    file.resize(k3::kTraceHeaderBytes + count * k3::kTraceRecordBytes);
    const std::uint64_t sum = XXH64(file.data() + k3::kTraceHeaderBytes, count * k3::kTraceRecordBytes, 0);
    std::memcpy(file.data() + 56, &count, 8);  // little-endian hosts only, as the format
    std::memcpy(file.data() + 64, &sum, 8);
  }
  const auto path = k3::fuzz::scratch().write("run.k3trace", file);
  k3::fuzz::guarded([&] {
    const k3::TraceHeader head = k3::read_trace_header(path);
    const k3::Trace trace = k3::read_trace(path);
    k3::require_trace_of_run(path, head, trace.header, true);
    k3::fuzz::check(trace.records.size() == trace.header.record_count, "record count differs from the records");
    for (std::size_t i = 0; i < trace.records.size(); ++i) {
      const auto& r = trace.records[i];
      k3::fuzz::check(r.layer < trace.header.layers && r.expert < trace.header.experts_per_layer,
                      "a record outside the geometry");
      if (i == 0) k3::fuzz::check(r.starts_group, "the first record does not start a group");
      if (i > 0 && !r.starts_group) k3::fuzz::check(r.layer == trace.records[i - 1].layer, "a group spans layers");
    }
    const auto again = k3::fuzz::scratch().path() / "again.k3trace";
    k3::write_trace(again, trace);
    const k3::Trace back = k3::read_trace(again);
    k3::fuzz::check(back.records == trace.records, "records differ after write and read");
  });
  return 0;
}
