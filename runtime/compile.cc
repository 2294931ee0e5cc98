// The offline pipeline: see compile.h.
#include "runtime/compile.h"

#include "maskstore/row_codec.h"
#include "streamline/row_fold.h"

namespace cfgmask {

namespace {

// Streamlining (unless turned off) and the statistics, after the store build.
Status Finish(const CompileOptions& options, bool streamline, CompiledStore* out) {
  Status st;
  auto& stats = out->stats;
  stats.rows_before_streamlining = static_cast<int64_t>(out->row_seq.size());
  stats.row_bytes_before = RowPayloadBytes(*out);
  if (!streamline) return Status::Ok();
  if (options.progress) options.progress("streamline", 0);
  StreamlineStats sl;
  st = StreamlineStore(out, StreamlineOptions{}, &sl);
  if (!st.ok()) return st;
  stats.streamlined = 1;
  stats.rows_deleted = sl.rows_deleted;
  stats.never_queries = sl.never_queries;
  stats.rows_after_fold = sl.rows_after;
  stats.row_bytes_after = sl.bytes_after;
  stats.fold_queries = sl.queries;
  stats.fold_proved = sl.proved;
  stats.seconds_streamline = sl.seconds;
  if (options.progress) options.progress("streamline", 1);
  return Status::Ok();
}

}  // namespace

Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline, CompiledStore* out) {
  CFGMASK_RETURN_IF_ERROR(CompileStore(grammar_path, tokenizer_path, options, out));
  return Finish(options, streamline, out);
}

Status CompileGrammar(const std::string& grammar_path, const PreparedTokenizer& tokenizer,
                      const CompileOptions& options, bool streamline, CompiledStore* out) {
  CFGMASK_RETURN_IF_ERROR(CompileStore(grammar_path, tokenizer, options, out));
  return Finish(options, streamline, out);
}

}  // namespace cfgmask
