/**
 * A model's tokenizer as Hugging Face ships it: `tokenizer.json` (normalizer,
 * pre-tokenizer, BPE / Unigram / WordPiece model, post-processor, decoder,
 * added tokens) run by @huggingface/tokenizers (the transformers.js
 * tokenizers), plus `tokenizer_config.json` (special tokens, chat templates,
 * clean-up flags) and an optional `chat_template.jinja` file, which newer
 * checkpoints ship instead of the `chat_template` key. The file's own regexes
 * are tried on adversarial texts under a time bound at load (regex-check.ts).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { ArgumentError, show } from "../errors.js";
import { type ChatMessage, ChatTemplate, type ChatTemplateOptions } from "./chat-template.js";
import { CHUNK_CHARS, chunkCuts, chunkableSentencePiece } from "./chunked-encoding.js";
import { useCharsmaps } from "./precompiled-charsmap.js";
import { checkTokenizerRegexes } from "./regex-check.js";
import { readJsonFile } from "../json-file.js";

type Json = Record<string, unknown>;

export interface TokenizerSource {
  /** The parsed tokenizer.json. */
  tokenizerJson: unknown;
  /** The parsed tokenizer_config.json (optional: some repos have none). */
  tokenizerConfig?: unknown;
  /** A chat template that overrides tokenizer_config's (the contents of chat_template.jinja). */
  chatTemplate?: string;
  /**
   * Named chat templates kept elsewhere than tokenizer_config (a GGUF's tokenizer.chat_template
   * and tokenizer.chat_template.NAME), each with the origin messages name; they win over
   * tokenizer_config's of the same name.
   */
  namedChatTemplates?: Readonly<Record<string, { source: string; origin: string }>>;
  /** Names the source in error messages. */
  source?: string;
  /**
   * The template for a model that ships none (model/chat-template-fallback.ts),
   * asked once at load, with the built tokenizer (its vocabulary tells the family).
   */
  fallbackChatTemplate?: (tokenizer: Tokenizer) => FallbackChatTemplate;
}

/** A chat template a model did not ship, chosen for it. */
export interface FallbackChatTemplate {
  /** Its name: "chatml", "llama3", … */
  name: string;
  /** The Jinja source. */
  source: string;
  /** Why this one, for the startup log ("llama-server's default", "its vocabulary has <|eot_id|>", …). */
  reason: string;
}

/** Options of the readers of a model's tokenizer (fromDir, a GGUF's): the fallback for a model without a chat template. */
export type TokenizerOptions = Pick<TokenizerSource, "fallbackChatTemplate">;

export interface EncodeOptions {
  /** Apply the post-processor's special tokens (BOS for Llama / Mistral). Default true, as in transformers. */
  addSpecialTokens?: boolean;
  /**
   * Stop early once more than this many ids are known (a prompt that cannot
   * fit the context need not be tokenized to its end). A result of at most
   * stopAfter ids is the whole encoding; a longer one only shows the text has
   * more than stopAfter tokens. Default: encode everything.
   */
  stopAfter?: number;
}

export interface DecodeOptions {
  /** Drop special tokens (BOS, EOS, <|im_start|>, …) from the text. Default false, as in transformers. */
  skipSpecialTokens?: boolean;
}

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A special-token entry of tokenizer_config: a string, or an AddedToken object `{ content, … }` (older files). */
function tokenContent(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (isObject(v) && typeof v["content"] === "string") return v["content"];
  return null;
}

export class Tokenizer {
  readonly #hf: HfTokenizer;
  /** tokenizer_config.json as read (or {}). */
  readonly config: Readonly<Json>;
  /** One past the largest token id of the vocabulary and the added tokens. */
  readonly vocabSize: number;
  /** Ids of the added tokens marked special (BOS, EOS, <|im_start|>, …). */
  readonly specialIds: ReadonlySet<number>;
  readonly bosToken: string | null;
  readonly eosToken: string | null;
  readonly bosTokenId: number | null;
  readonly eosTokenId: number | null;
  /** Named chat templates; the one used by default is `default` (or the only one). */
  readonly chatTemplates: Readonly<Record<string, string>>;
  /**
   * Where the default chat template came from: the file or metadata key of the
   * model that holds it, or `fallback NAME (REASON)` for a model without one;
   * null when there is none.
   */
  readonly chatTemplateOrigin: string | null;
  /**
   * The longest text one token can stand for, in UTF-16 code units (the
   * longest vocabulary piece or added token; a byte-level piece's characters
   * are bytes, never fewer than the text's code units), times the most a
   * known normalizer can shrink text; Infinity when a normalizer could shrink
   * it without bound. A text longer than n × maxTokenChars has more than n tokens.
   */
  readonly maxTokenChars: number;
  /** chatTemplates compiled at load, so a template that does not parse fails here, naming where it came from. */
  readonly #compiledTemplates: ReadonlyMap<string, ChatTemplate>;
  /** Names the model in messages (TokenizerSource.source). */
  readonly #where: string;
  readonly #tokens: Map<number, string>;
  /** Legacy SentencePiece: encode in pieces (chunked-encoding.ts), with these special ids around them. */
  readonly #chunks: { prefix: number[]; suffix: number[]; added: string[] } | null;
  /** The post-processor only does byte-level offsets (Qwen's, GPT-2's): a pair is the two encodings back to back. */
  readonly #pairByConcat: boolean;

  constructor(source: TokenizerSource) {
    const where = source.source ?? "tokenizer";
    this.#where = source.source ?? "this tokenizer";
    const tj = source.tokenizerJson;
    if (!isObject(tj) || !isObject(tj["model"])) throw new ArgumentError(`${where} tokenizer.json`, `must be an object with a "model", got ${show(tj)}`);
    const config = source.tokenizerConfig ?? {};
    if (!isObject(config)) throw new ArgumentError(`${where} tokenizer_config.json`, `must be an object, got ${show(config)}`);
    this.config = config;
    try {
      this.#hf = new HfTokenizer(tj, config);
    } catch (e) {
      throw new ArgumentError(`${where} tokenizer.json`, `cannot be loaded by @huggingface/tokenizers: ${(e as Error).message}`);
    }
    useCharsmaps(this.#hf, `${where} tokenizer.json`); // SentencePiece's own normalization table, not the library's NFKC stand-in
    checkTokenizerRegexes(tj, where); // the file's regexes, on adversarial texts, under a time bound
    this.#pairByConcat = byteLevelOnly(tj["post_processor"]);

    this.#tokens = new Map();
    const vocab = (tj["model"] as Json)["vocab"];
    if (Array.isArray(vocab)) vocab.forEach((entry, id) => this.#tokens.set(id, Array.isArray(entry) ? String(entry[0]) : String(entry))); // Unigram: [piece, score]
    else if (isObject(vocab)) for (const [piece, id] of Object.entries(vocab)) this.#tokens.set(id as number, piece);
    const special = new Set<number>();
    const added = Array.isArray(tj["added_tokens"]) ? (tj["added_tokens"] as Json[]) : [];
    for (const t of added) {
      if (typeof t["id"] !== "number" || typeof t["content"] !== "string") continue;
      this.#tokens.set(t["id"], t["content"]);
      if (t["special"] === true) special.add(t["id"]);
    }
    this.specialIds = special;
    let longest = 1;
    for (const piece of this.#tokens.values()) longest = Math.max(longest, piece.length);
    this.maxTokenChars = longest * normalizerShrink(tj["normalizer"]);
    this.#chunks = chunkableSentencePiece(tj) ? specialFrame(this.#hf, added) : null;
    let maxId = -1;
    for (const id of this.#tokens.keys()) maxId = Math.max(maxId, id);
    this.vocabSize = maxId + 1;

    this.bosToken = tokenContent(config["bos_token"]);
    this.eosToken = tokenContent(config["eos_token"]);
    this.bosTokenId = this.bosToken === null ? null : (this.tokenToId(this.bosToken) ?? null);
    this.eosTokenId = this.eosToken === null ? null : (this.tokenToId(this.eosToken) ?? null);
    const overrides = { ...source.namedChatTemplates, ...(source.chatTemplate === undefined ? {} : { default: { source: source.chatTemplate, origin: `${where} chat_template.jinja` } }) };
    const templates = chatTemplatesOf(config, overrides, where);
    if (templates["default"] === undefined && source.fallbackChatTemplate !== undefined) {
      const fallback = source.fallbackChatTemplate(this);
      templates["default"] = { template: new ChatTemplate(fallback.source, `the ${fallback.name} fallback chat template`), origin: `fallback ${fallback.name} (${fallback.reason})` };
    }
    this.chatTemplates = Object.fromEntries(Object.entries(templates).map(([name, t]) => [name, t.template.source]));
    this.chatTemplateOrigin = templates["default"]?.origin ?? null;
    this.#compiledTemplates = new Map(Object.entries(templates).map(([name, t]) => [name, t.template]));
  }

  /** Reads tokenizer.json, tokenizer_config.json (if present) and chat_template.jinja (if present) from a model directory. */
  static fromDir(dir: string, options: TokenizerOptions = {}): Tokenizer {
    const tokenizerPath = join(dir, "tokenizer.json");
    if (!existsSync(tokenizerPath)) throw new ArgumentError(dir, "has no tokenizer.json (kvflash needs the fast-tokenizer file that Hugging Face model repositories ship)");
    const configPath = join(dir, "tokenizer_config.json");
    const templatePath = join(dir, "chat_template.jinja");
    return new Tokenizer({
      tokenizerJson: readJsonFile(tokenizerPath),
      ...(existsSync(configPath) ? { tokenizerConfig: readJsonFile(configPath) } : {}),
      ...(existsSync(templatePath) ? { chatTemplate: readFileSync(templatePath, "utf8") } : {}),
      source: dir,
      ...options,
    });
  }

  /** The default chat template, or null if the tokenizer has none. */
  get chatTemplate(): string | null {
    return this.chatTemplates["default"] ?? null;
  }

  /** Text → token ids. */
  encode(text: string, options: EncodeOptions = {}): number[] {
    if (typeof text !== "string") throw new ArgumentError("text", `must be a string, got ${show(text)}`);
    const addSpecial = options.addSpecialTokens ?? true;
    const stopAfter = options.stopAfter ?? Infinity;
    if (this.#chunks === null || text.length <= 2 * CHUNK_CHARS) return this.#hf.encode(text, { add_special_tokens: addSpecial }).ids;
    const { prefix, suffix, added } = this.#chunks;
    const ids = addSpecial ? [...prefix] : [];
    let start = 0;
    for (const cut of [...chunkCuts(text, added), text.length]) {
      // Every piece after the first starts after a dropped space, which the Prepend normalizer puts back as "▁".
      for (const id of this.#hf.encode(text.slice(start, cut), { add_special_tokens: false }).ids) ids.push(id);
      if (ids.length > stopAfter) return ids;
      start = cut + 1;
    }
    if (addSpecial) ids.push(...suffix);
    return ids;
  }

  /**
   * A pair of texts → one input, as a cross-encoder takes it: the
   * post-processor's pair template (tokenizer.json, e.g. BERT's
   * [CLS] a [SEP] b [SEP] with type ids 0…0 1…1, XLM-R's <s> a </s></s> b </s>),
   * as transformers' tokenizer(a, b) encodes it.
   */
  encodePair(a: string, b: string): { ids: number[]; typeIds: number[] } {
    if (typeof a !== "string") throw new ArgumentError("a", `must be a string, got ${show(a)}`);
    if (typeof b !== "string") throw new ArgumentError("b", `must be a string, got ${show(b)}`);
    if (this.#pairByConcat) {
      // @huggingface/tokenizers 0.2's ByteLevel post-processor hands the pair back unmerged and encode() drops it;
      // the Rust library's default_process concatenates the two encodings, type ids 0 (Qwen3-Reranker's input).
      const ids = [...this.#hf.encode(a, { add_special_tokens: true }).ids, ...this.#hf.encode(b, { add_special_tokens: true }).ids];
      return { ids, typeIds: new Array<number>(ids.length).fill(0) };
    }
    const e = this.#hf.encode(a, { text_pair: b, add_special_tokens: true, return_token_type_ids: true });
    return { ids: e.ids, typeIds: e.token_type_ids ?? new Array<number>(e.ids.length).fill(0) };
  }

  /** Token ids → text. Ids outside [0, vocabSize) are an error. */
  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
        throw new ArgumentError(`ids[${i}]`, `must be a token id in [0, ${this.vocabSize}), got ${show(id)}`);
      }
    }
    if (ids.length === 0) return "";
    return this.#hf.decode([...ids], { skip_special_tokens: options.skipSpecialTokens ?? false });
  }

  /** The token string of an id (byte-level or SentencePiece form, e.g. "Ġworld", "▁world"), or undefined. */
  idToToken(id: number): string | undefined {
    return this.#tokens.get(id);
  }

  tokenToId(token: string): number | undefined {
    return this.#hf.token_to_id(token);
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  /**
   * Renders messages with the chat template (transformers' apply_chat_template
   * with tokenize=False). `addGenerationPrompt` defaults to true, as vLLM's chat
   * endpoint does.
   */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    const name = options.templateName ?? (options.tools && this.chatTemplates["tool_use"] ? "tool_use" : "default");
    const template = this.#compiledTemplates.get(name);
    if (template === undefined) {
      const names = Object.keys(this.chatTemplates);
      if (names.length === 0) throw new ArgumentError("messages", `cannot be rendered: ${this.#where} has no chat template`);
      throw new ArgumentError("templateName", `must be one of ${names.map((n) => JSON.stringify(n)).join(" | ")}, got ${show(name)}`);
    }
    return template.render(messages, options, this.#specialTokensMap());
  }

  /**
   * Renders and encodes a conversation. The template writes its own BOS, so the
   * text is encoded without adding special tokens (as transformers does).
   */
  encodeChat(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): number[] {
    return this.encode(this.applyChatTemplate(messages, options), { addSpecialTokens: false });
  }

  /** transformers' special_tokens_map: the variables every chat template may use. */
  #specialTokensMap(): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const key of ["bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"]) {
      const v = tokenContent(this.config[key]);
      if (v !== null) out[key] = v;
    }
    const extra = this.config["additional_special_tokens"];
    if (Array.isArray(extra)) out["additional_special_tokens"] = extra.map(tokenContent).filter((t) => t !== null);
    return out;
  }
}

/** The special ids the post-processor puts around a text (BOS for Llama), found by encoding "a" with and without them; null if they are not a plain frame. */
function specialFrame(hf: HfTokenizer, addedTokens: readonly Json[]): { prefix: number[]; suffix: number[]; added: string[] } | null {
  const plain = hf.encode("a", { add_special_tokens: false }).ids;
  const full = hf.encode("a", { add_special_tokens: true }).ids;
  for (let at = 0; at + plain.length <= full.length; at++) {
    if (plain.every((id: number, i: number) => full[at + i] === id)) {
      return { prefix: full.slice(0, at), suffix: full.slice(at + plain.length), added: addedTokens.map((t) => String(t["content"])) };
    }
  }
  return null;
}

/**
 * How many times shorter a normalizer can make a text: 1 for those that never
 * shrink it (Prepend, Lowercase, a Replace whose content is no shorter than
 * its pattern), 4 for Unicode composition (NFC / NFKC merge at most a few
 * code units into one), Infinity for anything else (stripping, accents, …).
 */
function normalizerShrink(n: unknown): number {
  if (n === null || n === undefined) return 1;
  if (!isObject(n)) return Infinity;
  switch (n["type"]) {
    case "Sequence":
      return Array.isArray(n["normalizers"]) ? n["normalizers"].reduce((f: number, m: unknown) => f * normalizerShrink(m), 1) : Infinity;
    case "Prepend":
    case "Lowercase":
    case "NFD":
    case "NFKD":
      return 1;
    case "NFC":
    case "NFKC":
      return 4;
    case "Replace": {
      const pattern = isObject(n["pattern"]) ? n["pattern"]["String"] : undefined;
      return typeof pattern === "string" && typeof n["content"] === "string" && n["content"].length >= pattern.length ? 1 : Infinity;
    }
    default:
      return Infinity;
  }
}

/**
 * `chat_template` is a string or a list of `{ name, template }`; chat_template.jinja
 * (or a GGUF's tokenizer.chat_template[.NAME]) overrides the template of its name. Each template in use is compiled here, so one that does
 * not parse fails the load with an error naming where it came from.
 */
function chatTemplatesOf(config: Json, overrides: Readonly<Record<string, { source: string; origin: string }>>, where: string): Record<string, { template: ChatTemplate; origin: string }> {
  const found: Record<string, { source: string; origin: string }> = {};
  const raw = config["chat_template"];
  if (typeof raw === "string") found["default"] = { source: raw, origin: `${where} tokenizer_config.json chat_template` };
  else if (Array.isArray(raw)) {
    raw.forEach((entry, i) => {
      if (!isObject(entry) || typeof entry["name"] !== "string" || typeof entry["template"] !== "string") {
        throw new ArgumentError(`${where} tokenizer_config.json chat_template[${i}]`, `must be { name, template } strings, got ${show(entry)}`);
      }
      found[entry["name"]] = { source: entry["template"], origin: `${where} tokenizer_config.json chat_template[${i}] (${JSON.stringify(entry["name"])})` };
    });
  } else if (raw !== undefined && raw !== null) {
    throw new ArgumentError(`${where} tokenizer_config.json chat_template`, `must be a string or a list of { name, template }, got ${show(raw)}`);
  }
  Object.assign(found, overrides);
  const out: Record<string, { template: ChatTemplate; origin: string }> = {};
  for (const [name, { source, origin }] of Object.entries(found)) out[name] = { template: new ChatTemplate(source, origin), origin };
  const names = Object.keys(out);
  if (out["default"] === undefined && names.length === 1) out["default"] = out[names[0]!]!;
  return out;
}

/** True if a tokenizer.json post_processor adds no tokens (ByteLevel, or a Sequence of them), so a pair is its two encodings concatenated. */
function byteLevelOnly(pp: unknown): boolean {
  if (!isObject(pp)) return false;
  if (pp["type"] === "ByteLevel") return true;
  return pp["type"] === "Sequence" && Array.isArray(pp["processors"]) && pp["processors"].length > 0 && pp["processors"].every(byteLevelOnly);
}
