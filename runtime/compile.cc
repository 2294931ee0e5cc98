// The offline pipeline: see compile.h.
#include "runtime/compile.h"

#include "maskstore/row_codec.h"
#include "streamline/row_fold.h"

namespace cfgmask {

Status CompileGrammar(const std::string& grammar_path, const std::string& tokenizer_path,
                      const CompileOptions& options, bool streamline, CompiledStore* out) {
  Status st = CompileStore(grammar_path, tokenizer_path, options, out);
  if (!st.ok()) return st;
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

}  // namespace cfgmask
