/* PocketLLM public C API.
 *
 * Handles are opaque. Every function that can fail returns a pllm_status; the
 * message for the most recent failure on the calling thread is available from
 * pllm_last_error(). No C++ exception ever crosses this boundary.
 *
 * Threading: a pllm_model is immutable after loading and may be shared by many
 * sessions on many threads. A pllm_session must be used by one thread at a time,
 * except pllm_session_cancel(), which may be called from any thread. */
#ifndef POCKETLLM_H
#define POCKETLLM_H

#include <stddef.h>
#include <stdint.h>

/* Marks the API's functions as the exports of a shared libpocketllm, which is built with
 * -fvisibility=hidden so that only these are visible (PLLM_BUILD_SHARED; the Python package
 * loads it). Default visibility is also what a static build gets, so nothing changes there. */
#ifndef PLLM_API
#if defined(__GNUC__) || defined(__clang__)
#define PLLM_API __attribute__((visibility("default")))
#else
#define PLLM_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pllm_status {
  PLLM_OK = 0,
  PLLM_ERR_INVALID_ARGUMENT = 1,
  PLLM_ERR_IO = 2,
  PLLM_ERR_BAD_FORMAT = 3,
  PLLM_ERR_UNSUPPORTED = 4,
  PLLM_ERR_OUT_OF_RANGE = 5,
  PLLM_ERR_OUT_OF_MEMORY = 6,
  PLLM_ERR_CANCELLED = 7,
  PLLM_ERR_INTERNAL = 8
} pllm_status;

typedef int32_t pllm_token;
typedef struct pllm_model pllm_model;
typedef struct pllm_session pllm_session;

/* Message for the last failed call on this thread ("" if none). Valid until the next call. */
PLLM_API const char* pllm_last_error(void);
PLLM_API const char* pllm_status_string(pllm_status status);
PLLM_API const char* pllm_version(void);
/* Name of the kernel instruction set chosen at start-up (e.g. "avx512"). */
PLLM_API const char* pllm_isa(void);
/* Threads a session uses by default: one per physical performance core. */
PLLM_API int32_t pllm_default_threads(void);

/* ---- Models -------------------------------------------------------------- */

/* progress in [0, 1]; return non-zero to abort the load (the load then fails with PLLM_ERR_CANCELLED). */
typedef int (*pllm_progress_fn)(float progress, void* user_data);

#define PLLM_REPACK_OFF (-1)
#define PLLM_REPACK_AUTO 0
#define PLLM_REPACK_ON 1

typedef struct pllm_model_params {
  int vocab_only;              /* load only the tokenizer (works on files without tensors) */
  pllm_progress_fn progress;   /* may be NULL */
  void* progress_user_data;
  /* Weights held as 16-row panels, copied once at load with the file's pages released (same
   * memory), for the kernels that read them (Q4_0/Q4_1/Q8_0: int16 on AVX2 and AVX-512, int8 on
   * AVX-512 VNNI and ARM dotprod/i8mm); exact
   * and f16 sessions unpack panels on the fly (slower).
   * PLLM_REPACK_AUTO (0, the default): the types whose int16 kernels (the default activation
   * mode) read panels on this CPU. PLLM_REPACK_ON (1): every type with a panel kernel, for
   * int8-activation sessions. PLLM_REPACK_OFF (-1): keep the file's layout (for exact or f16
   * sessions). */
  int repack_weights;
  /* How pllm_chat_apply_template renders a conversation. PLLM_CHAT_TEMPLATE_FILE (0, the
   * default): the file's own tokenizer.chat_template, by the Jinja interpreter; a template it
   * cannot render is an error. PLLM_CHAT_TEMPLATE_NATIVE (1): the built-in layout of the family
   * the template is recognised as (ChatML, Llama 3, Gemma, ...). A file without a template takes
   * the built-in layout either way. */
  int chat_template;
} pllm_model_params;

#define PLLM_CHAT_TEMPLATE_FILE 0
#define PLLM_CHAT_TEMPLATE_NATIVE 1

PLLM_API pllm_model_params pllm_model_default_params(void);
PLLM_API pllm_status pllm_model_load(const char* path, const pllm_model_params* params, pllm_model** out);
PLLM_API void pllm_model_free(pllm_model* model);

PLLM_API int32_t pllm_model_n_vocab(const pllm_model* model);
PLLM_API int32_t pllm_model_n_ctx_train(const pllm_model* model);
/* Tensors held as repacked panels (0 without repack_weights or on CPUs without panel kernels). */
PLLM_API int32_t pllm_model_n_repacked(const pllm_model* model);
/* Matrices whose type no panel kernel reads (K-quants, a Q6_K output head...) that repacking
 * copied, in the file's layout, into the same huge-page memory as the panels: a decode step
 * streams them without a TLB miss every 4 KiB. 0 without repack_weights. */
PLLM_API int32_t pllm_model_n_copied(const pllm_model* model);
PLLM_API pllm_token pllm_model_bos(const pllm_model* model); /* -1 if none */
PLLM_API pllm_token pllm_model_eos(const pllm_model* model); /* -1 if none */
PLLM_API int pllm_model_is_eog(const pllm_model* model, pllm_token token);
/* Static activation scales (pocketllm.act_scale.<tensor> f32 metadata, checked at load): the
 * number of matrix products with int8 kernels that have one (*n_static) and that have none
 * (*n_dynamic: with static_activations they keep per-block dynamic quantisation). Either
 * pointer may be NULL; both 0 for a vocab-only model. */
PLLM_API void pllm_model_act_scale_counts(const pllm_model* model, int32_t* n_static, int32_t* n_dynamic);
/* 1 if pllm_tokenize with add_special prepends BOS (tokenizer.ggml.add_bos_token, else the
 * tokenizer type's default), else 0. */
PLLM_API int pllm_model_add_bos(const pllm_model* model);

/* Describe a GGUF file as JSON (architecture, hyper-parameters, tokenizer, tensors with
 * types and bytes) without loading weights. Free *json_out with pllm_string_free. */
PLLM_API pllm_status pllm_inspect_file(const char* path, char** json_out);
PLLM_API void pllm_string_free(char* s);

/* ---- Tokenizer ------------------------------------------------------------- */

/* Writes up to capacity ids; *n_out receives the full count. If capacity is too small the
 * call fails with PLLM_ERR_OUT_OF_RANGE and *n_out tells the size needed. */
PLLM_API pllm_status pllm_tokenize(const pllm_model* model, const char* text, size_t text_len, int add_special,
                                   int parse_special, pllm_token* out, size_t capacity, size_t* n_out);
/* A prompt's tokens the way the CLI, the server and the bindings make them: special tokens
 * parsed (a chat template writes them as text), BOS added when the model wants one, and a
 * second BOS dropped when the text already begins with it. Same capacity rules. */
PLLM_API pllm_status pllm_tokenize_prompt(const pllm_model* model, const char* text, size_t text_len,
                                          pllm_token* out, size_t capacity, size_t* n_out);
/* Text of the tokens (special tokens rendered when render_special). Same capacity rules. */
PLLM_API pllm_status pllm_detokenize(const pllm_model* model, const pllm_token* tokens, size_t n_tokens,
                                     int render_special, char* out, size_t capacity, size_t* n_out);

typedef struct pllm_chat_message {
  const char* role; /* "system", "user" or "assistant" */
  const char* content;
} pllm_chat_message;

/* Render messages with the model's chat template. Free *text_out with pllm_string_free. */
PLLM_API pllm_status pllm_chat_apply_template(const pllm_model* model, const pllm_chat_message* messages,
                                              size_t n_messages, int add_generation_prompt, char** text_out);
/* The same with variables the template reads besides the conversation: variables_json is a
 * JSON object such as {"enable_thinking": false} (Qwen3's thinking switch), or NULL for none.
 * Not JSON, not an object, or a name the engine sets itself (messages, tools,
 * add_generation_prompt, bos_token, ...) is PLLM_ERR_INVALID_ARGUMENT; variables with the
 * built-in layouts (PLLM_CHAT_TEMPLATE_NATIVE, or a file without a template) are
 * PLLM_ERR_UNSUPPORTED. */
PLLM_API pllm_status pllm_chat_apply_template_vars(const pllm_model* model, const pllm_chat_message* messages,
                                                   size_t n_messages, int add_generation_prompt,
                                                   const char* variables_json, char** text_out);

/* ---- Sessions ------------------------------------------------------------ */

/* How the KV cache stores keys and values (memory and bandwidth per token of context). */
typedef enum pllm_kv_type {
  PLLM_KV_F16 = 0, /* half precision (default) */
  PLLM_KV_F32 = 1, /* full precision */
  PLLM_KV_Q8 = 2,  /* int8, one scale per 64 values: about half of f16 */
  PLLM_KV_Q4 = 3   /* 4-bit (keys per channel, values per token) with an f16 tail of recent tokens */
} pllm_kv_type;

/* Which hardware runs the forward passes of an engine. Whatever runs them, the output is the
 * CPU path's (up to summation order): a step the device cannot take, a device that fails to
 * start or is lost mid-generation runs on the CPU (pllm_backend_stats tells which ran). */
typedef enum pllm_backend {
  PLLM_BACKEND_CPU = 0,    /* the CPU only (default) */
  PLLM_BACKEND_AUTO = 1,   /* a GPU when the machine has one (never a CPU Vulkan device such as
                              lavapipe), per phase as measured faster by the offload policy */
  PLLM_BACKEND_VULKAN = 2  /* the Vulkan device, whatever its type */
} pllm_backend;

/* How activations meet quantised weights (pllm_session_params.activations). Each mode has one
 * word, the same in the CLI (--act), the server, simulate and the bindings:
 * pllm_activations_name / pllm_activations_parse. */
typedef enum pllm_activations {
  PLLM_ACT_DEFAULT = 0, /* the library's default: int16 (or what an older int8/f16/static flag asks) */
  PLLM_ACT_EXACT = 1,   /* "exact": f32 activations; weights decoded in registers (matches a float
                           reference up to summation order) */
  PLLM_ACT_INT16 = 2,   /* "int16": activations rounded per 32 values to int16 (a step of 2^-16 of the
                           block's largest value), exact integer products: int8-mode speed, near-exact */
  PLLM_ACT_INT8 = 3,    /* "int8": activations quantised to int8 for quantised weights (W4A8 as
                           llama.cpp; rounding that can flip near-tied tokens) */
  PLLM_ACT_F16 = 4,     /* "f16": W4A16, activations rounded to fp16 once per row for Q4_0/Q4_1/Q8_0
                           weights (fp16 FMLA on ARM with FP16 arithmetic); other types exact */
  PLLM_ACT_STATIC = 5   /* "static": int8 with the calibrated per-tensor steps the file carries
                           (pocketllm.act_scale.* metadata, see pllm_model_act_scale_counts) instead of
                           per-block absmax / 127; products without a scale stay dynamic. Session
                           creation fails with PLLM_ERR_INVALID_ARGUMENT when the model has no scales. */
} pllm_activations;

/* The word of a pllm_activations value ("int16", "exact", "int8", "f16", "static"; DEFAULT gives
 * the default's word), or NULL for a value that is none of them. Static storage. */
PLLM_API const char* pllm_activations_name(int32_t activations);
/* The pllm_activations a word names (exactly one of the words above); PLLM_ERR_INVALID_ARGUMENT
 * (pllm_last_error lists the words) for anything else. */
PLLM_API pllm_status pllm_activations_parse(const char* word, int32_t* activations);
/* The pllm_model_params.repack_weights that suits sessions of this mode: PLLM_REPACK_ON for the
 * int8 modes, PLLM_REPACK_AUTO for int16 (and DEFAULT), PLLM_REPACK_OFF for exact and f16. */
PLLM_API int32_t pllm_activations_repack(int32_t activations);

typedef struct pllm_session_params {
  int32_t n_ctx;     /* context length in tokens; 0 = min(model's training context, 4096) */
  int32_t n_threads; /* 0 = number of performance cores */
  int32_t int8_activations; /* older spelling of activations = PLLM_ACT_INT8 (kept for apps built
                               against it): 1 asks for int8 unless activations says otherwise */
  int32_t no_fuse;          /* 1: run Q/K/V and gate/up as separate jobs (to measure fusion) */
  int32_t profile;          /* 1: record per-op timings, read with pllm_session_profile */
  int32_t kv_type;          /* a pllm_kv_type */
  int32_t kv_window;        /* 0: no window (a prompt longer than n_ctx is an error); N > 0: keep the
                               first kv_sinks positions plus the most recent N - kv_sinks, so the
                               conversation never runs out of context and memory stays flat */
  int32_t kv_sinks;         /* positions kept forever with a window (default 4); < kv_window */
  int32_t n_batch;          /* most tokens per forward pass in prefill; 0 = 64 */
  int32_t f16_activations;  /* older spelling of PLLM_ACT_F16; with int8 or static set, creation fails */
  int32_t static_activations; /* older spelling of PLLM_ACT_STATIC (implies int8) */
  int32_t backend;          /* a pllm_backend, for the session's own engine (pllm_session_create);
                               a session on a shared engine uses the engine's */
  int32_t activations;      /* a pllm_activations. With an older flag set as well, both must name the
                               same mode (or this is PLLM_ACT_DEFAULT), else creation fails. */
} pllm_session_params;

PLLM_API pllm_session_params pllm_session_default_params(void);
PLLM_API pllm_status pllm_session_create(pllm_model* model, const pllm_session_params* params, pllm_session** out);
PLLM_API void pllm_session_free(pllm_session* session);
PLLM_API int32_t pllm_session_n_ctx(const pllm_session* session);
/* Bytes the session's KV cache reserves at creation: what it holds once the context is full. */
PLLM_API uint64_t pllm_session_kv_bytes(const pllm_session* session);
/* Bytes of it in memory now: it grows in blocks of 64 positions as the context fills and shrinks
 * on reset (the whole of pllm_session_kv_bytes where the platform cannot grow it). */
PLLM_API uint64_t pllm_session_kv_committed_bytes(const pllm_session* session);
/* Per-op timings recorded since creation (params.profile = 1): a Chrome trace JSON (opens in
 * Perfetto / chrome://tracing) and a text table of time per op. Either output may be NULL; free
 * the strings with pllm_string_free. PLLM_ERR_INVALID_ARGUMENT if profiling is off. */
PLLM_API pllm_status pllm_session_profile(pllm_session* session, char** chrome_trace_json, char** summary);

/* Forget the conversation (the KV cache). */
PLLM_API void pllm_session_reset(pllm_session* session);

/* Append tokens to the session's context and run the model over them. If logits_out is not
 * NULL it receives n_tokens * n_vocab floats: the logits after every appended token. */
PLLM_API pllm_status pllm_session_eval(pllm_session* session, const pllm_token* tokens, size_t n_tokens,
                                       float* logits_out);

/* ---- Images in (vision) ---------------------------------------------------- */

/* A vision encoder (llama.cpp's mmproj GGUF: SigLIP with the idefics3 (SmolVLM) or gemma3
 * projector) paired with a text model. Immutable: one may serve many sessions. */
typedef struct pllm_vision pllm_vision;
/* An image file's bytes (PNG, JPEG or BMP), as an app holds an attachment. */
typedef struct pllm_image {
  const uint8_t* data;
  size_t size;
} pllm_image;
/* Where each image goes in a prompt's text: llama.cpp's default media marker. */
#define PLLM_IMAGE_MARKER "<__media__>"

/* Loads an mmproj file for model (the projector's output width must be the model's embedding
 * width and its image tokens in the vocabulary). int8_activations: 1, the encoder's products
 * with int8 activations (as llama.cpp computes them on quantised weights); 0, the default: int16
 * activations for quantised weights (Q8_0, Q4_0...: exact integer sums on repacked panels, as
 * the text path's default) and exact f32 products for F16 / F32 weights.
 * PLLM_ERR_UNSUPPORTED when this build has no vision layer or for another projector type. */
PLLM_API pllm_status pllm_vision_load(const pllm_model* model, const char* mmproj_path, int int8_activations,
                                      pllm_vision** out);
PLLM_API void pllm_vision_free(pllm_vision* vision);
/* Tokens per encoded tile of the projector (an image is one or more tiles). */
PLLM_API int32_t pllm_vision_tokens_per_tile(const pllm_vision* vision);

/* A prompt with images as tokens for session: text (a rendered chat prompt, say) with one
 * PLLM_IMAGE_MARKER per image; the images decoded, laid out with the projector's tokens, and
 * their rows given to the session as negative token ids (derived from the pixels, so the same
 * photo gives the same ids). Pass the tokens to pllm_generate, pllm_session_eval or
 * pllm_session_prewarm of that session: an image is encoded when its rows first run, on the
 * session's engine, and not again while the session or the prefix cache holds them. BOS is
 * added as pllm_tokenize_prompt adds it. Same capacity rules as pllm_tokenize. Bad images get
 * PLLM_ERR_BAD_FORMAT or PLLM_ERR_OUT_OF_RANGE (over 16384 px a side or 64 Mpixel). */
PLLM_API pllm_status pllm_vision_tokenize(const pllm_vision* vision, pllm_session* session, const char* text,
                                          size_t text_len, const pllm_image* images, size_t n_images,
                                          pllm_token* out, size_t capacity, size_t* n_out);

/* ---- Grammars: constrained generation ------------------------------------- */

/* A compiled grammar for one model's vocabulary; generation with it (pllm_sampling_params.grammar)
 * writes only text the grammar accepts, and ends (at an end-of-generation token) only where the
 * text is complete. Immutable: one grammar may serve many sessions and threads at once. */
typedef struct pllm_grammar pllm_grammar;
typedef enum pllm_grammar_kind {
  PLLM_GRAMMAR_GBNF = 0,        /* text: llama.cpp's GBNF, start rule "root" */
  PLLM_GRAMMAR_JSON_SCHEMA = 1, /* text: a JSON Schema (a keyword it cannot enforce is an error) */
  PLLM_GRAMMAR_JSON = 2         /* any JSON value; text must be NULL */
} pllm_grammar_kind;
/* Compiles text for model's vocabulary. PLLM_ERR_INVALID_ARGUMENT with the reason
 * (pllm_last_error: line:column for GBNF, keyword and JSON pointer for a schema). */
PLLM_API pllm_status pllm_grammar_create(const pllm_model* model, pllm_grammar_kind kind, const char* text,
                                         pllm_grammar** out);
PLLM_API void pllm_grammar_free(pllm_grammar* grammar);
/* The grammar as GBNF (what a schema compiled to), into out (NUL-terminated); *n_written gets
 * its length. PLLM_ERR_OUT_OF_RANGE (and the length needed in *n_written) when it does not fit. */
PLLM_API pllm_status pllm_grammar_gbnf(const pllm_grammar* grammar, char* out, size_t capacity, size_t* n_written);

/* ---- Tools (function calling) --------------------------------------------- */

/* A request's tools for a model: the definitions, tool_choice and whether several calls may come
 * in one reply. tools_json: OpenAI's `tools` array ([{"type": "function", "function": {"name",
 * "description", "parameters": <JSON Schema>}}]). tool_choice_json: "\"auto\"" (also NULL),
 * "\"none\"", "\"required\"" or {"type": "function", "function": {"name": ...}} as JSON text.
 * The model's chat template decides how calls are written (Qwen/Hermes <tool_call> JSON,
 * Llama 3 JSON, LFM2 pythonic, Phi-4-mini; templates without tools learn the <tool_call> form
 * from a system turn). PLLM_ERR_INVALID_ARGUMENT naming the field (tools[1].function.name, a
 * schema keyword it cannot enforce and its pointer); PLLM_ERR_UNSUPPORTED for a template
 * whose call format is not implemented. */
typedef struct pllm_tools pllm_tools;
PLLM_API pllm_status pllm_tools_create(const pllm_model* model, const char* tools_json, const char* tool_choice_json,
                                       int parallel_tool_calls, pllm_tools** out);
PLLM_API void pllm_tools_free(pllm_tools* tools);
/* The grammar the reply follows (owned by tools; set it as pllm_sampling_params.grammar): under
 * "auto" text is free until the model starts a call, then the call must be valid; under
 * "required" or a named function a call from the first token; under "none" the model cannot
 * start one. */
PLLM_API const pllm_grammar* pllm_tools_grammar(const pllm_tools* tools);
/* Render a conversation given as OpenAI's `messages` JSON (roles system, developer, user,
 * assistant with tool_calls, tool with tool_call_id) with tools (NULL: none; earlier calls and
 * results are rendered either way). variables_json as pllm_chat_apply_template_vars. A tool
 * result answering no earlier call, or arguments that are not a JSON object, are
 * PLLM_ERR_INVALID_ARGUMENT naming the message. Free *text_out with pllm_string_free. */
PLLM_API pllm_status pllm_chat_apply_template_json(const pllm_model* model, const char* messages_json,
                                                   const pllm_tools* tools, int add_generation_prompt,
                                                   const char* variables_json, char** text_out);
/* A reply's generated tokens read as OpenAI's assistant message: {"content": "..." or null,
 * "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": "<JSON>"}}]}
 * (tool_calls empty under "none"; a call cut off by max_tokens stays in content). Free
 * *json_out with pllm_string_free. */
PLLM_API pllm_status pllm_tools_parse(const pllm_tools* tools, const pllm_token* tokens, size_t n_tokens,
                                      char** json_out);
/* The same as the reply streams: push each generated token as it comes (a negative token ends
 * the reply) and get what can be sent now, {"content": "...", "tool_calls": [{"index", "id",
 * "name", "arguments"}]}, as OpenAI's delta.tool_calls: id and name only in a call's first
 * delta, then argument fragments that concatenate to its arguments' JSON. Text that may still
 * become a call's marker, or is half a UTF-8 character, waits for the next push. One stream per
 * reply; the tools must outlive it. Free *json_out with pllm_string_free. */
typedef struct pllm_tools_stream pllm_tools_stream;
PLLM_API pllm_status pllm_tools_stream_create(const pllm_tools* tools, pllm_tools_stream** out);
PLLM_API void pllm_tools_stream_free(pllm_tools_stream* stream);
PLLM_API pllm_status pllm_tools_stream_push(pllm_tools_stream* stream, pllm_token token, char** json_out);

/* ---- Generation ------------------------------------------------------------ */

typedef struct pllm_sampling_params {
  float temperature;    /* 0 = greedy */
  int32_t top_k;        /* 0 = off */
  float top_p;          /* 1 = off */
  float min_p;          /* 0 = off */
  float repeat_penalty; /* 1 = off */
  int32_t repeat_last_n;
  uint64_t seed;
  int32_t max_tokens;               /* tokens to generate at most */
  const char* const* stop_strings;  /* generation stops when the text ends with one (not emitted) */
  size_t n_stop_strings;
  int32_t ignore_eos;               /* 1: do not stop at end-of-generation tokens (benchmarks) */
  const pllm_grammar* grammar;      /* NULL: free text; else the text follows it (same model) */
  const struct pllm_draft_params* draft; /* NULL: plain decoding; else speculative (below) */
} pllm_sampling_params;

/* Speculative decoding: a drafter guesses the next tokens, the model checks them all in one
 * batched pass and keeps each guess it would have drawn itself. The output is plain decoding's:
 * greedy bit for bit (default int16 and exact activations), and seeded sampling draws the same
 * tokens (each token is drawn once, from the model's own logits for its position; a guess is
 * kept when the draw equals it, which is the speculative-sampling rule for a greedy drafter).
 * The draft length adapts to the measured acceptance and step times, down to 0 (plain
 * decoding) when guesses do not pay. The session keeps its drafter (a draft model's KV cache)
 * between calls while the parameters stay the same. */
typedef enum pllm_draft_kind {
  PLLM_DRAFT_NONE = 0,
  PLLM_DRAFT_LOOKUP = 1, /* the continuation of the latest earlier occurrence of the last n-gram
                            (prompt lookup: no model, no memory) */
  PLLM_DRAFT_MODEL = 2,  /* a smaller model with the same vocabulary, on the session's engine */
  PLLM_DRAFT_SKIP = 3    /* the model itself with layers left out (pllm_draft_calibrate) */
} pllm_draft_kind;
typedef struct pllm_draft_params {
  pllm_draft_kind kind;
  int32_t max_tokens;          /* guesses per verify pass at most, 1..32 (0: 8) */
  const pllm_model* model;     /* PLLM_DRAFT_MODEL: the draft model (kept alive by the caller) */
  const int32_t* skip_layers;  /* PLLM_DRAFT_SKIP: the layers left out ... */
  size_t n_skip_layers;
  const char* skip_file;       /* ... or pllm_draft_calibrate's file for this model (list NULL) */
} pllm_draft_params;
PLLM_API pllm_draft_params pllm_draft_default_params(void); /* PLLM_DRAFT_NONE, max_tokens 8 */
/* Measures which layers a PLLM_DRAFT_SKIP draft should leave out on `tokens` (a calibration
 * text, >= 16 tokens; a few hundred suffice): greedily the layers whose removal keeps the most of
 * the model's greedy predictions, while the expected speed-up grows. Writes the result as JSON
 * to out_path (skip_file) and *speedup_out (if not NULL) gets the expected decode speed-up.
 * Uses (and resets) the session. */
PLLM_API pllm_status pllm_draft_calibrate(pllm_session* session, const pllm_token* tokens, size_t n_tokens,
                                          int32_t max_tokens, const char* out_path, double* speedup_out);

/* The sampler's generic defaults (llama.cpp's): temperature 0.8, top-k 40, top-p 0.95, min-p 0.05. */
PLLM_API pllm_sampling_params pllm_sampling_default_params(void);
/* The sampling that suits this model (what `pocketllm run` and `chat` use): the model file's
 * general.sampling.* values (temp, top_k, top_p, min_p, penalty_repeat, penalty_last_n) where
 * it has them, else greedy (temperature 0; the other fields as pllm_sampling_default_params).
 * pllm_sampling_default_params() for a NULL model. */
PLLM_API pllm_sampling_params pllm_model_sampling_params(const pllm_model* model);

/* Called for each generated token. text holds the newly completed UTF-8 text (never a
 * partial character; may be empty). Return non-zero to stop generation. */
typedef int (*pllm_token_fn)(pllm_token token, const char* text, size_t text_len, void* user_data);

typedef enum pllm_stop_reason {
  PLLM_STOP_EOG = 0,        /* the model ended its turn */
  PLLM_STOP_MAX_TOKENS = 1,
  PLLM_STOP_STRING = 2,
  PLLM_STOP_CALLBACK = 3,
  PLLM_STOP_CANCELLED = 4,
  PLLM_STOP_CONTEXT_FULL = 5
} pllm_stop_reason;

typedef struct pllm_generation_stats {
  int32_t n_prompt_tokens;
  int32_t n_reused_tokens; /* prompt tokens already in the session's KV cache */
  int32_t n_generated;
  double ttft_ms;          /* from call to first generated token */
  double prefill_tps;
  double decode_tps;
  pllm_stop_reason stop_reason;
  int32_t n_cached_tokens; /* prompt tokens restored from the prefix cache, not computed (counted
                              in n_reused_tokens too) */
  int32_t n_draft_passes;   /* speculative decoding: verify passes that carried guesses */
  int32_t n_drafted;        /* guesses verified */
  int32_t n_draft_accepted; /* guesses kept (tokens gained over plain decoding's steps) */
} pllm_generation_stats;

/* Generate a reply to `prompt`, the whole context as tokens. The session reuses the longest
 * prefix of prompt already in its KV cache, so a chat can pass the full conversation each
 * turn. Fails with PLLM_ERR_OUT_OF_RANGE if the prompt does not fit the context. */
PLLM_API pllm_status pllm_generate(pllm_session* session, const pllm_token* prompt, size_t n_prompt,
                                   const pllm_sampling_params* sampling, pllm_token_fn on_token, void* user_data,
                                   pllm_generation_stats* stats);

/* Prewarm: start computing the KV cache for `tokens` (a prompt's known beginning: system prompt,
 * document, conversation so far) on a background thread and return at once; the next
 * pllm_generate whose prompt starts with them reuses the work. Supersedes a prewarm still
 * running; any other call on the session (generate, eval, reset, free, ...) first stops a
 * running prewarm, keeping what it finished. Uses the session's prefix cache like
 * pllm_generate. Tokens (not text) so the prompt's tokenisation is the one that is cached. */
PLLM_API pllm_status pllm_session_prewarm(pllm_session* session, const pllm_token* tokens, size_t n_tokens);
/* Waits for the session's prewarm to finish: PLLM_OK, PLLM_ERR_CANCELLED when it was stopped,
 * or its error (e.g. PLLM_ERR_OUT_OF_RANGE when the tokens do not fit the context). */
PLLM_API pllm_status pllm_session_prewarm_wait(pllm_session* session);

/* Ask a running pllm_generate/pllm_session_eval on this session to stop (any thread). */
PLLM_API void pllm_session_cancel(pllm_session* session);

/* ---- Engines: many sessions, one set of threads, batched steps --------------
 * An engine owns the worker threads and the scratch of forward passes. Sessions created on
 * one engine share them (instead of one thread pool each) and can be advanced together:
 * pllm_engine_step runs one forward pass over a row of every session, so the weights are
 * read once for all of them. Steps on one engine are serialised: sessions of one engine may
 * be used from several threads (each session by one thread at a time), and they take turns. */
typedef struct pllm_engine pllm_engine;

typedef struct pllm_engine_params {
  int32_t n_threads; /* 0 = number of performance cores */
  int32_t backend;   /* a pllm_backend */
} pllm_engine_params;

/* Where an engine's steps ran. */
typedef struct pllm_backend_stats {
  char device[128];        /* the device backend, e.g. "Vulkan: llvmpipe (...) (cpu, fp16)"; "" if none */
  char device_error[256];  /* why there is no device backend when one was asked for */
  int64_t device_steps;    /* forward passes the device ran */
  int64_t cpu_steps;       /* forward passes the CPU ran */
  int64_t fallbacks;       /* device steps that failed and were run again on the CPU */
  char last_fallback[256]; /* why the last step that could not use the device ran on the CPU */
  int64_t validation_messages; /* Vulkan validation-layer warnings and errors (PLLM_VK_VALIDATION=1); -1: off */
} pllm_backend_stats;
PLLM_API pllm_status pllm_engine_backend_stats(const pllm_engine* engine, pllm_backend_stats* out);
/* The stats of the engine the session steps on. */
PLLM_API pllm_status pllm_session_backend_stats(const pllm_session* session, pllm_backend_stats* out);
/* What the probe finds on this machine (Vulkan loader, devices, features) as JSON
 * ({"vulkan": {...}}) or text: writes at most cap bytes (NUL-terminated when cap > 0) and
 * returns the full length, so a call with cap 0 sizes the buffer. */
PLLM_API size_t pllm_backend_probe(int32_t as_json, char* buf, size_t cap);

PLLM_API pllm_engine_params pllm_engine_default_params(void);
PLLM_API pllm_status pllm_engine_create(const pllm_engine_params* params, pllm_engine** out);
/* Sessions created on the engine keep what they need of it alive: free it whenever. */
PLLM_API void pllm_engine_free(pllm_engine* engine);
PLLM_API int32_t pllm_engine_n_threads(const pllm_engine* engine);
/* pllm_session_create on a shared engine (params->n_threads is ignored). */
PLLM_API pllm_status pllm_session_create_on(pllm_engine* engine, pllm_model* model, const pllm_session_params* params,
                                            pllm_session** out);

/* One session's part of a pllm_engine_step. */
typedef struct pllm_step_item {
  pllm_session* session;
  const pllm_token* tokens; /* one decode token, or a prefill chunk */
  size_t n_tokens;          /* 1 .. the session's n_batch */
  const pllm_sampling_params* sampling; /* NULL: logits only (pllm_session_logits); else one token is
                                           sampled from the last logits with the session's sampler
                                           (seeded by sampling->seed when first used or changed;
                                           max_tokens and stop strings do not apply; a grammar
                                           runs on while the same one is named) */
  float* logits_out;        /* NULL, or n_tokens * n_vocab floats: every row's logits (then
                               pllm_session_logits and sampling are not available for this item) */
  pllm_token token;         /* out: the sampled token, or -1 */
  pllm_status status;       /* out: this session's outcome; PLLM_ERR_CANCELLED when
                               pllm_session_cancel stopped it mid-step (the session is then as
                               before the step); PLLM_ERR_OUT_OF_RANGE when its context is full */
} pllm_step_item;

/* Advances every item's session by its tokens in ONE forward pass. The sessions must be on
 * this engine, distinct, of one model and one activation mode. Returns PLLM_OK when the step
 * ran (each item's status says how its session fared: one session's error leaves the others
 * advanced), or an error when the step as a whole could not run (then no session moved). */
PLLM_API pllm_status pllm_engine_step(pllm_engine* engine, pllm_step_item* items, size_t n_items);
/* The logits (n_vocab floats) of the session's last pllm_engine_step row (when the step
 * sampled, as the sampler left them: repetition penalty applied); valid until the session's
 * next step or eval. */
PLLM_API const float* pllm_session_logits(const pllm_session* session);
PLLM_API int32_t pllm_session_n_batch(const pllm_session* session);

/* ---- Prefix cache ---------------------------------------------------------- */

/* A cache of KV-cache snapshots of block-aligned (64-token) prompt prefixes, shared by the
 * sessions of one model: a prompt that starts like an earlier one (system prompt, document,
 * earlier turns) restores that prefix instead of computing it; greedy output is unchanged.
 * Tiers: RAM (LRU within ram_bytes) and, with dir set, a directory of files (one per entry,
 * written in the background, checksummed and tagged with the model and format version;
 * LRU by mtime within disk_bytes, entries older than ttl_seconds expire). Damaged or foreign
 * files are deleted with a one-line warning on stderr. Sessions with a KV window bypass it. */
typedef struct pllm_prefix_cache pllm_prefix_cache;

typedef struct pllm_prefix_cache_params {
  uint64_t ram_bytes;  /* RAM budget (default 256 MiB; 0: no RAM tier) */
  const char* dir;     /* directory for the disk tier (created if missing); NULL or "": none */
  uint64_t disk_bytes; /* disk budget (default 1 GiB) */
  int64_t ttl_seconds; /* files unused for longer are removed (default 7 days; 0: never) */
} pllm_prefix_cache_params;

typedef struct pllm_prefix_cache_counters {
  uint64_t ram_hits, ram_misses, disk_hits, disk_misses;
  uint64_t inserts;         /* snapshots offered by generations */
  uint64_t ram_entries, ram_bytes;
  uint64_t disk_writes, disk_write_bytes, disk_evictions;
  uint64_t disk_bad_files;  /* corrupt, truncated, foreign or old files deleted */
  uint64_t disk_write_errors;
  uint64_t restored_tokens; /* prompt tokens restored instead of computed */
  uint64_t computed_tokens; /* prompt tokens computed by prefill (sessions using the cache) */
} pllm_prefix_cache_counters;

PLLM_API pllm_prefix_cache_params pllm_prefix_cache_default_params(void);
PLLM_API pllm_status pllm_prefix_cache_create(const pllm_model* model, const pllm_prefix_cache_params* params,
                                              pllm_prefix_cache** out);
/* Releases the handle; sessions still using the cache keep it alive. When the last user is
 * gone, queued disk writes are finished before it is destroyed. */
PLLM_API void pllm_prefix_cache_free(pllm_prefix_cache* cache);
/* Use cache (NULL: none) in this session's pllm_generate calls. It must belong to the
 * session's model (PLLM_ERR_INVALID_ARGUMENT otherwise). */
PLLM_API pllm_status pllm_session_set_prefix_cache(pllm_session* session, pllm_prefix_cache* cache);
PLLM_API pllm_status pllm_prefix_cache_stats(const pllm_prefix_cache* cache, pllm_prefix_cache_counters* out);
/* Blocks until the background writer has written everything queued so far. */
PLLM_API void pllm_prefix_cache_flush(pllm_prefix_cache* cache);

/* ---- Scheduled runtime: priorities, UI frame budget, thermal governor --------
 * A runtime steps the sessions of one model on one engine for the app: requests enter a
 * priority queue (interactive before background, aging so nothing starves; cancel, reset and
 * interrupt ahead of all generation), each step packs the most urgent rows into one batched
 * forward pass, long prompts go in chunks, and a session is paused (its KV moved out, output
 * unchanged) when the KV budget runs out. In frame mode the app's frame clock bounds the work
 * per frame so the UI thread keeps its share of the cores; the thermal governor caps batch and
 * step rate as the device heats (Android AThermal / iOS thermalState via
 * pllm_runtime_set_thermal, or /sys/class/thermal).
 * Drive it with pllm_runtime_start (a driver thread that sleeps when there is no work) or by
 * calling pllm_runtime_step from a thread of your own. Events arrive on the stepping thread;
 * a callback may submit or cancel but must not free the runtime. */
typedef struct pllm_runtime pllm_runtime;

typedef enum pllm_request_class { PLLM_CLASS_INTERACTIVE = 0, PLLM_CLASS_BACKGROUND = 1 } pllm_request_class;
typedef enum pllm_control { PLLM_CONTROL_CANCEL = 0, PLLM_CONTROL_RESET = 1, PLLM_CONTROL_INTERRUPT = 2 } pllm_control;
typedef enum pllm_end_reason {
  PLLM_END_DONE = 0,         /* prompt prefilled and max_tokens generated */
  PLLM_END_EOS = 1,          /* the model ended its turn */
  PLLM_END_CANCELLED = 2,
  PLLM_END_RESET = 3,
  PLLM_END_INTERRUPTED = 4,
  PLLM_END_FAILED = 5,       /* see the event's status (e.g. PLLM_ERR_OUT_OF_RANGE: context full) */
  PLLM_END_KV_EXHAUSTED = 6  /* the session cannot fit the KV budget even alone */
} pllm_end_reason;

typedef struct pllm_runtime_params {
  int32_t interactive_weight;   /* base priority of interactive requests (default 500) */
  int32_t background_weight;    /* of background requests (default 100); + waited ms / 10 */
  int32_t prefill_chunk;        /* prompt tokens of one session per step (default 64) */
  int32_t max_batch_rows;       /* sessions per step (default 8) */
  int64_t kv_budget_tokens;     /* KV tokens all sessions may hold (default 1 << 20) */
  int32_t max_tokens_per_frame; /* frame mode: decode tokens per session per frame (default 3) */
  float ui_headroom;            /* frame mode: the share of a frame the UI's work may take while the
                                   engine uses every thread; beyond it the engine leaves the UI a
                                   core (default 0.75; see pllm_runtime_ui_frame) */
  float interactive_ttft_bound_ms; /* an interactive request still without a token this long after
                                   its submit is counted (pllm_runtime_ttft_over_bound) and traced
                                   ("ttft_over_bound"); 0: no bound (default 1000) */
  int32_t governor;             /* 1: thermal governor on (default 0) */
  int32_t thermal_sysfs;        /* with the governor: 1 reads /sys/class/thermal, 0 only what
                                   pllm_runtime_set_thermal reports (default 0) */
  int32_t trace_events;         /* > 0: keep the last this many trace events (steps, requests,
                                   counters: batch, KV, tokens/s, thermal level, caps) for
                                   pllm_runtime_trace_json (default 0: no tracing) */
  int32_t trace_atrace;         /* with trace_events: also write them as atrace lines to the
                                   kernel's trace_marker when it is writable (Perfetto /
                                   systrace on Linux and Android; default 0) */
} pllm_runtime_params;

typedef struct pllm_event {
  int32_t kind;          /* 0: a token, 1: the request ended */
  uint64_t request;
  int64_t session;
  pllm_token token;      /* kind 0 */
  const char* text;      /* kind 0: the text this token completes (UTF-8, maybe empty); valid in the call */
  size_t text_len;
  int32_t index;         /* kind 0: 0 for the request's first token */
  pllm_end_reason reason; /* kind 1 */
  pllm_status status;    /* kind 1, PLLM_END_FAILED: why */
  int32_t n_generated;   /* kind 1 */
  int32_t n_drafted;     /* kind 1, speculative decoding (sampling.draft): guesses verified */
  int32_t n_draft_accepted; /* kind 1: guesses kept */
} pllm_event;
typedef void (*pllm_event_fn)(const pllm_event* event, void* user_data);

typedef struct pllm_request {
  pllm_request_class klass;
  int32_t base_weight;        /* < 0: the class's weight */
  const pllm_token* prompt;   /* appended to the session's context first; may be NULL with n_prompt 0 */
  size_t n_prompt;
  int32_t max_tokens;         /* then at most this many generated tokens (0: prefill only) */
  const pllm_sampling_params* sampling; /* NULL: the model's defaults (pllm_model_sampling_params) */
  pllm_event_fn on_event;     /* may be NULL */
  void* user_data;
} pllm_request;

PLLM_API pllm_runtime_params pllm_runtime_default_params(void);
PLLM_API pllm_status pllm_runtime_create(pllm_engine* engine, pllm_model* model, const pllm_runtime_params* params,
                                         pllm_runtime** out);
/* Stops the driver thread and frees the runtime's sessions; pending requests get no events. */
PLLM_API void pllm_runtime_free(pllm_runtime* runtime);
/* A session owned by the runtime (n_threads ignored; n_batch must hold a prefill chunk). */
PLLM_API pllm_status pllm_runtime_add_session(pllm_runtime* runtime, const pllm_session_params* params,
                                              int64_t* out_key);
PLLM_API pllm_status pllm_runtime_remove_session(pllm_runtime* runtime, int64_t session);
PLLM_API pllm_status pllm_runtime_submit(pllm_runtime* runtime, int64_t session, const pllm_request* request,
                                         uint64_t* out_id);
/* CANCEL ends the session's requests so far (a row in flight stops mid-step), RESET also
 * clears its context, INTERRUPT ends only the request in progress. */
PLLM_API pllm_status pllm_runtime_control(pllm_runtime* runtime, int64_t session, pllm_control action);
/* The frame clock: call at each frame start (e.g. from Choreographer / CADisplayLink) with
 * the frame's start on the runtime's clock (pllm_runtime_now_ms) and its period. The runtime
 * then runs at most max_tokens_per_frame tokens per session per frame, and uses every thread
 * while the UI's frames leave headroom, one thread fewer (a core for the UI) when they do not
 * or when a frame is missed (docs/RUNTIME.md, "Frame policy"). A call that comes late (the UI
 * thread was busy) or after skipped vsyncs counts as a missed frame. period_ms <= 0 leaves
 * frame mode (flat out). */
PLLM_API pllm_status pllm_runtime_frame(pllm_runtime* runtime, double frame_start_ms, double period_ms);
/* Optional, after each frame's UI work: it took ui_ms from the frame's start (vsync to done).
 * With it the runtime knows the UI's load before frames are missed. */
PLLM_API pllm_status pllm_runtime_ui_frame(pllm_runtime* runtime, double frame_start_ms, double ui_ms);
/* Requests so far that had no token within their class's first-token bound. */
PLLM_API int32_t pllm_runtime_ttft_over_bound(const pllm_runtime* runtime);
/* pllm_runtime_frame for every runtime made on this engine (one vsync callback for them all). */
PLLM_API pllm_status pllm_engine_frame(pllm_engine* engine, double frame_start_ms, double period_ms);
/* Frame mode without a frame clock: the runtime makes frames of period_ms itself (0: off). A
 * call to pllm_runtime_frame / pllm_engine_frame takes over from it. */
PLLM_API pllm_status pllm_runtime_frame_period(pllm_runtime* runtime, double period_ms);
PLLM_API double pllm_runtime_now_ms(const pllm_runtime* runtime);
/* The OS's thermal state, for the governor: level = AThermalStatus 0..6 or -1 to leave it;
 * headroom = AThermal_getThermalHeadroom or NaN when unknown. */
PLLM_API pllm_status pllm_runtime_set_thermal(pllm_runtime* runtime, int32_t level, float headroom);
/* iOS: the same from ProcessInfo.thermalState (nominal 0, fair 1, serious 2, critical 3; it
 * maps to levels 0, 1, 3 and 4: at "serious" iOS already throttles). */
PLLM_API pllm_status pllm_runtime_set_ios_thermal_state(pllm_runtime* runtime, int32_t state);
/* One step on the calling thread. *out_state (may be NULL): 0 ran, 1 idle, 2 waiting for the
 * next frame, 3 throttled by the governor. Not while the driver thread runs. */
PLLM_API pllm_status pllm_runtime_step(pllm_runtime* runtime, int32_t* out_state);
PLLM_API pllm_status pllm_runtime_start(pllm_runtime* runtime);
PLLM_API void pllm_runtime_stop(pllm_runtime* runtime);
/* Blocks until no request is pending (1) or timeout_ms passes (0). */
PLLM_API int32_t pllm_runtime_wait_idle(pllm_runtime* runtime, double timeout_ms);
/* The governor's level in force (0 when off). */
PLLM_API int32_t pllm_runtime_thermal_level(const pllm_runtime* runtime);
/* The trace so far as Chrome / Perfetto JSON (open in ui.perfetto.dev); free with
 * pllm_string_free. PLLM_ERR_INVALID_ARGUMENT when the runtime was made without trace_events. */
PLLM_API pllm_status pllm_runtime_trace_json(const pllm_runtime* runtime, char** out_json);

/* ---- Introspection for benchmarks ------------------------------------------ */

/* Total bytes of all weight tensors in the file (0 for a vocab-only model or NULL). */
PLLM_API uint64_t pllm_model_weight_bytes(const pllm_model* model);
/* Weight bytes one decoded token reads: every tensor except the lookup tables, which are only
 * gathered one row per token: the token-embedding table (unless it doubles as the output head,
 * tied embeddings) and Gemma 4's per-layer embedding table. */
PLLM_API uint64_t pllm_model_weight_bytes_per_token(const pllm_model* model);

#ifdef __cplusplus
}
#endif

#endif /* POCKETLLM_H */
