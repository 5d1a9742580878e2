// llama.cpp timed through its C API, for `npm run bench -- gguf` and `serve`
// (bench/suites/gguf.ts and serve.ts build this file with the machine's g++
// against the libllama and headers node-llama-cpp ships:
// bench/llamacpp-harness.ts). The Node binding is left out on purpose: it
// adds milliseconds to every decoded token, which would flatter kvflash.
//
//   bench MODEL.gguf LIB_DIR THREADS PROMPT DECODE [GPU_LAYERS [SEQS]]
//
// Loads the model once (the backends in LIB_DIR; GPU_LAYERS, default 0, of
// its layers offloaded to the first GPU backend there: the `webgpu` suite's
// Vulkan peer passes 999, every layer) into a context of SEQS sequences
// (default 1; n_ctx SEQS · (PROMPT + DECODE + 16), n_batch SEQS · PROMPT),
// then serves one timed run for every line read on stdin, so the caller can
// alternate these runs with its own; "quit" or end of input exits.
//
// "run" (or "run P D": P ≤ PROMPT, D ≤ DECODE, a shorter one, a warm-up) is
// llama-bench's pp + tg on one context: the KV cache cleared, a P-token
// prompt (ids (i · 2654435761) mod n_vocab, as the kvflash side) decoded in
// one llama_decode, then D single-token steps, each feeding back the
// argmax of the last logits, on one persistent threadpool (as llama-bench).
// It prints one JSON line:
//   {"prefill_ms": …, "decode_ms": [step ms …]}
//
// "batch N P D ID…" (N ≤ SEQS, P ≤ PROMPT, 1 ≤ D ≤ DECODE, then N · P token
// ids: sequence s's prompt is ids[s·P, (s+1)·P)) is what llama-server's slots
// do for N requests arriving together, minus HTTP: the KV cache cleared, all
// N prompts in one llama_decode (each token with its sequence's seq_id,
// logits on each prompt's last token only), whose argmaxes are every
// sequence's first output token; then D − 1 steps, each ONE llama_decode of
// N tokens (sequence s's last token at its own position, seq_id s, logits on
// all), the argmax of each fed back. D output tokens a sequence, N · D in all:
//   {"wall_ms": …, "prefill_ms": …, "decode_ms": [step ms …], "output_tokens": N·D, "last": [id …]}
// wall_ms spans the whole batch (prefill, steps, every argmax); prefill_ms the
// prompts' llama_decode and first argmaxes; last each sequence's last output
// token (a check: a sequence decodes the same alone and in a batch). The KV cache is not unified
// (kv_unified false, llama.cpp's default and its advice for sequences that
// share no prefix): each sequence attends over its own cells.
//
// Once after loading it prints {"ready": true, "n_vocab": …, "flash_attn":
// "…", "gpu": "…", "cpu": "…"} (gpu: the first GPU device's description, ""
// when none; cpu: the features the loaded CPU backend variant was built for,
// ggml_backend_get_features, e.g. "AVX2 FMA …": which x86 dots it runs,
// pmaddubsw on AVX2, vpdpbusd on AVX_VNNI / AVX512_VNNI).
// Errors go to stderr with exit status 1.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void die(const std::string& message) {
  std::fprintf(stderr, "llamacpp-bench: %s\n", message.c_str());
  std::exit(1);
}

static void quiet_log(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

static int argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

// One "batch N P D ID…" run (the header above): prints its JSON line.
static void run_batch(llama_context* ctx, int n_vocab, int seqs, int prompt, int decode, const std::string& line) {
  std::istringstream in(line.substr(5));
  int n = 0, p = 0, d = 0;
  if (!(in >> n >> p >> d) || n < 1 || n > seqs || p < 1 || p > prompt || d < 1 || d > decode) {
    die("\"batch N P D ID…\" needs 1 ≤ N ≤ SEQS (" + std::to_string(seqs) + "), 1 ≤ P ≤ PROMPT (" + std::to_string(prompt) + "), 1 ≤ D ≤ DECODE (" + std::to_string(decode) + "), got \"" + line.substr(0, 40) + "\"");
  }
  std::vector<llama_token> ids(static_cast<size_t>(n) * p);
  for (size_t i = 0; i < ids.size(); i++) {
    long long id = -1;
    if (!(in >> id) || id < 0 || id >= n_vocab) die("batch: token " + std::to_string(i) + " of " + std::to_string(ids.size()) + " is missing or outside 0.." + std::to_string(n_vocab - 1));
    ids[i] = static_cast<llama_token>(id);
  }
  std::string extra;
  if (in >> extra) die("batch: more than N · P = " + std::to_string(ids.size()) + " token ids");
  llama_memory_clear(llama_get_memory(ctx), true);

  // Prefill: N · P tokens, one seq_id each, logits on each prompt's last token.
  llama_batch batch = llama_batch_init(n * p, 0, 1);
  std::vector<llama_token> next(n);
  const double t0 = now_ms();
  batch.n_tokens = n * p;
  for (int s = 0; s < n; s++) {
    for (int i = 0; i < p; i++) {
      const int k = s * p + i;
      batch.token[k] = ids[k];
      batch.pos[k] = i;
      batch.n_seq_id[k] = 1;
      batch.seq_id[k][0] = s;
      batch.logits[k] = i == p - 1;
    }
  }
  if (llama_decode(ctx, batch) != 0) die("llama_decode failed on the batch's prompts");
  for (int s = 0; s < n; s++) next[s] = argmax(llama_get_logits_ith(ctx, s * p + p - 1), n_vocab);
  const double prefill_ms = now_ms() - t0;

  // D − 1 steps: one token a sequence, each at its own position, logits on all.
  std::vector<double> steps;
  for (int step = 1; step < d; step++) {
    const double t1 = now_ms();
    batch.n_tokens = n;
    for (int s = 0; s < n; s++) {
      batch.token[s] = next[s];
      batch.pos[s] = p + step - 1;
      batch.n_seq_id[s] = 1;
      batch.seq_id[s][0] = s;
      batch.logits[s] = 1;
    }
    if (llama_decode(ctx, batch) != 0) die("llama_decode failed on a batched decode step");
    for (int s = 0; s < n; s++) next[s] = argmax(llama_get_logits_ith(ctx, s), n_vocab);
    steps.push_back(now_ms() - t1);
  }
  const double wall_ms = now_ms() - t0;
  llama_batch_free(batch);
  std::printf("{\"wall_ms\": %.4f, \"prefill_ms\": %.4f, \"decode_ms\": [", wall_ms, prefill_ms);
  for (size_t s = 0; s < steps.size(); s++) std::printf("%s%.4f", s ? ", " : "", steps[s]);
  std::printf("], \"output_tokens\": %d, \"last\": [", n * d);
  for (int s = 0; s < n; s++) std::printf("%s%d", s ? ", " : "", next[s]);
  std::printf("]}\n");
  std::fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc < 6 || argc > 8) die("usage: bench MODEL.gguf LIB_DIR THREADS PROMPT DECODE [GPU_LAYERS [SEQS]]");
  const char* model_path = argv[1];
  const int threads = std::atoi(argv[3]);
  const int prompt = std::atoi(argv[4]);
  const int decode = std::atoi(argv[5]);
  const int gpu_layers = argc >= 7 ? std::atoi(argv[6]) : 0;
  const int seqs = argc == 8 ? std::atoi(argv[7]) : 1;
  if (threads < 1 || prompt < 1 || decode < 0 || gpu_layers < 0 || seqs < 1) die("THREADS, PROMPT and SEQS must be ≥ 1, DECODE and GPU_LAYERS ≥ 0");

  llama_log_set(quiet_log, nullptr);
  ggml_backend_load_all_from_path(argv[2]);
  llama_backend_init();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = gpu_layers;
  std::string gpu_name;
  for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
    ggml_backend_dev_t dev = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU) {
      gpu_name = std::string(ggml_backend_dev_name(dev)) + ": " + ggml_backend_dev_description(dev);
      break;
    }
  }
  if (gpu_layers > 0 && gpu_name.empty()) die(std::string("GPU_LAYERS ") + std::to_string(gpu_layers) + " asks for a GPU, but no GPU backend device was loaded from " + argv[2]);
  llama_model* model = llama_model_load_from_file(model_path, mp);
  if (model == nullptr) die(std::string("cannot load ") + model_path);

  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = seqs * (prompt + decode + 16);
  cp.n_batch = seqs * prompt;
  cp.n_ubatch = seqs * prompt;
  cp.n_seq_max = seqs;
  cp.kv_unified = false;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (ctx == nullptr) die("cannot create a context");
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));

  // A persistent threadpool, as llama-bench attaches one (its default poll 50);
  // without it ggml starts and joins fresh threads on every llama_decode.
  ggml_backend_dev_t cpu_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (cpu_dev == nullptr) die(std::string("no CPU backend loaded from ") + argv[2]);
  ggml_backend_reg_t cpu_reg = ggml_backend_dev_backend_reg(cpu_dev);
  auto* threadpool_new = reinterpret_cast<decltype(ggml_threadpool_new)*>(ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_new"));
  auto* threadpool_free = reinterpret_cast<decltype(ggml_threadpool_free)*>(ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_free"));
  if (threadpool_new == nullptr || threadpool_free == nullptr) die("the CPU backend has no ggml_threadpool_new/free");
  ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
  ggml_threadpool* threadpool = threadpool_new(&tpp);
  if (threadpool == nullptr) die("cannot create a threadpool of " + std::to_string(threads) + " threads");
  llama_attach_threadpool(ctx, threadpool, nullptr);

  std::vector<llama_token> ids(prompt);
  for (int i = 0; i < prompt; i++) ids[i] = static_cast<llama_token>((static_cast<uint64_t>(i) * 2654435761u) % static_cast<uint64_t>(n_vocab));

  // The CPU backend's build features (value "1": on), space-separated.
  std::string cpu_features;
  if (auto* get_features = reinterpret_cast<ggml_backend_get_features_t>(ggml_backend_reg_get_proc_address(cpu_reg, "ggml_backend_get_features"))) {
    for (ggml_backend_feature* f = get_features(cpu_reg); f != nullptr && f->name != nullptr; f++) {
      if (std::string(f->value) != "1") continue;
      if (!cpu_features.empty()) cpu_features += ' ';
      cpu_features += f->name;
    }
  }
  for (std::string* text : {&gpu_name, &cpu_features})
    for (char& c : *text)
      if (c == '"' || c == '\\') c = '\'';
  std::printf("{\"ready\": true, \"n_vocab\": %d, \"flash_attn\": \"%s\", \"gpu\": \"%s\", \"cpu\": \"%s\"}\n", n_vocab, llama_flash_attn_type_name(cp.flash_attn_type), gpu_name.c_str(), cpu_features.c_str());
  std::fflush(stdout);

  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
    if (line.rfind("batch ", 0) == 0) {
      run_batch(ctx, n_vocab, seqs, prompt, decode, line);
      continue;
    }
    int p = prompt;
    int d = decode;
    if (line != "run" && (std::sscanf(line.c_str(), "run %d %d", &p, &d) != 2 || p < 1 || p > prompt || d < 0 || d > decode)) {
      die("expected \"run\", \"run P D\" (1 ≤ P ≤ PROMPT, 0 ≤ D ≤ DECODE), \"batch N P D ID…\" or \"quit\" on stdin, got \"" + line + "\"");
    }
    llama_memory_clear(llama_get_memory(ctx), true);

    double t0 = now_ms();
    if (llama_decode(ctx, llama_batch_get_one(ids.data(), p)) != 0) die("llama_decode failed on the prompt");
    llama_token next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    const double prefill_ms = now_ms() - t0;

    std::vector<double> steps;
    for (int s = 0; s < d; s++) {
      t0 = now_ms();
      if (llama_decode(ctx, llama_batch_get_one(&next, 1)) != 0) die("llama_decode failed on a decode step");
      next = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
      steps.push_back(now_ms() - t0);
    }
    std::printf("{\"prefill_ms\": %.4f, \"decode_ms\": [", prefill_ms);
    for (size_t s = 0; s < steps.size(); s++) std::printf("%s%.4f", s ? ", " : "", steps[s]);
    std::printf("]}\n");
    std::fflush(stdout);
  }
  llama_free(ctx);
  threadpool_free(threadpool);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
