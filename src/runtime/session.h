// A session: one conversation over a shared model. Owns its KV cache and the token history
// that says what the cache holds; its steps run on an engine (runtime/engine.h) that owns
// the threads and scratch and may be shared with other sessions.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "base/result.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/step.h"
#include "runtime/engine.h"
#include "runtime/image_rows.h"

namespace pllm {

class PrefixCache;

struct SessionConfig {
  int n_ctx = 0;      // 0: min(training context, 4096)
  int n_threads = 0;  // 0: default_thread_count(); ignored for a session on a given engine
  EngineBackend backend = EngineBackend::cpu;  // of the private engine; ignored on a given engine
  int n_batch = 64;   // tokens per forward() during prefill
  // How activations meet quantised weights (model/act_mode.h); static needs a file with
  // calibrated scales (model/act_scales.h).
  ActMode act = kDefaultActMode;
  bool fuse = true;               // one pool job for Q/K/V and for gate/up (false: --no-fuse)
  bool profile = false;           // record per-op timings (Tracer)
  KvOptions kv;                   // KV storage type, sliding window and sinks
  // The image rows the session can run (runtime/image_rows.h), shared with other sessions (a
  // server's: an image encoded for one request serves the next); null: its own.
  std::shared_ptr<ImageRows> image_rows;
};

class Session;

// One session's part of a batched step (Session::step).
struct SessionStep {
  Session* session = nullptr;
  std::span<const int32_t> tokens;  // one decode token or a prefill chunk (<= the session's n_batch)
  bool logits = true;               // leave the last row's logits in session->last_logits()
  float* logits_all = nullptr;      // instead: every row's logits, tokens.size() * n_vocab floats
  Result<void> result;              // this session's outcome (cancelled, context full, ...)
  // Each row exactly as a one-row decode step (SeqStep::as_decode_steps: a verify pass).
  bool as_decode_steps = false;
};

class Session {
 public:
  // engine: the engine to step on, shared with other sessions; null: a private engine with
  // cfg.n_threads threads.
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, const SessionConfig& cfg,
                                                 std::shared_ptr<Engine> engine = nullptr);
  ~Session();

  // Advances every session by its tokens in ONE forward pass, so the weights are read once
  // for all of them. The sessions share one engine, model and activation mode. A session
  // whose tokens do not fit (context, batch size) or that is cancelled mid-step gets its own
  // error in its result, and its cache and history stay as before the step (a windowed or q4
  // cache may have to drop more, as truncate() says); the others go on. Returns an error when the step as a whole is malformed or failed (then every result
  // carries it and no session moved).
  static Result<void> step(std::span<SessionStep> steps);

  const Model& model() const { return *model_; }
  Engine& engine() const { return *engine_; }
  const std::shared_ptr<Engine>& shared_engine() const { return engine_; }
  int n_ctx() const { return n_ctx_; }
  int n_batch() const { return n_batch_; }
  const std::vector<int32_t>& history() const { return history_; }

  // Append tokens and run them. logits_all: nullptr or n * n_vocab floats (every position).
  Result<void> eval(std::span<const int32_t> tokens, float* logits_all);
  // eval with every row's logits exactly those of one-token steps over the same tokens (a
  // speculative verify pass: guesses must not change what plain decoding computes).
  Result<void> eval_as_steps(std::span<const int32_t> tokens, float* logits_all);
  // Append tokens and leave the last token's logits in last_logits().
  Result<void> eval_last(std::span<const int32_t> tokens);
  // eval (logits_all) or eval_last (null) with the layers skip_layers marks left out
  // (StepOptions::skip_layers): self-speculative drafts, whose positions the caller truncates
  // before verifying them, and their calibration.
  Result<void> eval_skipping(std::span<const int32_t> tokens, std::span<const uint8_t> skip_layers,
                             float* logits_all = nullptr);
  // The image rows this session can run (runtime/image_rows.h): tokens < 0 in eval, generate
  // and prewarm stand for them.
  ImageRows& image_rows() { return *image_rows_; }
  float* last_logits() { return logits_.data(); }
  const float* last_logits() const { return logits_.data(); }

  // Keep at most the first n tokens of the history (the KV cache beyond them is dropped).
  // Keeps fewer when the cache cannot resume there exactly (a window already slid past
  // what position n needs; a q4 group already quantised): check history().size().
  void truncate(size_t n);
  // Exactly the first n tokens: what truncate's cache could not keep is run again (speculative
  // rollback); last_logits() is left as it was.
  Result<void> truncate_exactly(size_t n);
  void reset() { truncate(0); }
  // True when every layer has a sliding window: no context limit.
  bool unbounded() const { return kv_->unbounded(); }
  const KvCache& kv_cache() const { return *kv_; }
  // How this session computes its KV (the activation mode; 0 = exact): the prefix cache keys
  // on it, so a prefix computed with int8 activations is never restored into an exact session.
  uint32_t compute_tag() const;

  // KV snapshot (model/kv_snapshot.h) of the first n history tokens: their KV slots plus the
  // tokens. Errors when the cache has a window, n > history().size(), or (q4) n is not a
  // point the cache can resume from.
  Result<std::vector<uint8_t>> save_prefix(size_t n);
  // Replaces the KV cache and history by a snapshot's n tokens, after checking it (corrupt,
  // truncated, other model, other KV type, other format version: an error, and the session
  // is unchanged).
  // verified: the bytes were checksummed already (see parse_kv_snapshot).
  Result<void> restore_prefix(std::span<const uint8_t> snapshot, bool verified = false);

  // Whether save_prefix can work at all (no sliding window).
  bool snapshots_supported() const { return kv_->prefix_bytes(0).ok(); }
  // The prefix cache generate() and a prewarm consult and fill (runtime/prefix_reuse.h); null: none.
  void set_prefix_cache(std::shared_ptr<PrefixCache> cache) {
    stop_background();
    prefix_cache_ = std::move(cache);
  }
  PrefixCache* prefix_cache() const { return prefix_cache_.get(); }

  // Background work on this session, such as a prewarm (runtime/prefix_reuse.h): runs `work`
  // on its own thread and the engine's background lane. Supersedes background work still
  // running. Every other call that touches the cache (eval, truncate, snapshots,
  // set_prefix_cache, destruction, and generate()) first stops it; what it computed so far
  // stays in the cache and is reused like any history.
  using BackgroundWork = std::function<Result<void>(Session&)>;
  void start_background(BackgroundWork work);
  // Waits for the background work (if any) and returns its result (cancelled when superseded).
  Result<void> wait_background();
  // Cancels and joins running background work; a no-op on its own thread.
  void stop_background();

  // C++ tools only (calibration): every weight product's input goes to `observer` first
  // (model/act_observer.h); null detaches. The caller keeps it alive while attached.
  void set_act_observer(ActObserver* observer) {
    stop_background();
    observer_ = observer;
  }

  // Op timings when created with profile = true, else null.
  Tracer* tracer() { return tracer_.get(); }

  void request_cancel() { cancel_.store(true); }
  void clear_cancel() { cancel_.store(false); }
  bool cancel_requested() const { return cancel_.load(); }

 private:
  Session(std::shared_ptr<const Model> model, std::shared_ptr<Engine> engine, int n_ctx, const SessionConfig& cfg);
  Result<void> run(std::span<const int32_t> tokens, float* logits, bool all_logits,
                   std::span<const uint8_t> skip_layers = {}, bool as_decode_steps = false);
  Result<void> resume_image(const ImageRun& run, std::span<const int32_t> tokens, float* logits, bool all_logits,
                            size_t done);
  StepOptions step_options() const;

  std::shared_ptr<const Model> model_;
  std::shared_ptr<Engine> engine_;
  int n_ctx_, n_batch_;
  ActMode act_mode_;
  bool fuse_;
  ActObserver* observer_ = nullptr;
  Engine::Lane lane_ = Engine::Lane::foreground;  // background while running background work
  std::unique_ptr<Tracer> tracer_;
  std::unique_ptr<KvCache> kv_;
  std::vector<int32_t> history_;
  std::shared_ptr<ImageRows> image_rows_;
  std::vector<float> logits_;  // [n_vocab]
  std::atomic<bool> cancel_{false};
  std::shared_ptr<PrefixCache> prefix_cache_;
  // Background work runs on its own thread and the engine's background lane (lower-priority
  // workers), so typing/UI threads and foreground sessions keep the cores.
  std::thread background_;
  Result<void> background_result_;
};

}  // namespace pllm
