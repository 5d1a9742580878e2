// Every benchmark suite, by the name `npm run bench -- <suite>` takes.
import type { Suite } from "../harness.js";
import { attention } from "./attention.js";
import { defaultModel } from "./default-model.js";
import { embed } from "./embed.js";
import { fairness } from "./fairness.js";
import { floor } from "./floor.js";
import { gguf } from "./gguf.js";
import { ggufKernels } from "./gguf-kernels.js";
import { linalg } from "./linalg.js";
import { model } from "./model.js";
import { paged } from "./paged.js";
import { roofline } from "./roofline.js";
import { sampler } from "./sampler.js";
import { scale } from "./scale.js";
import { samplerDecode } from "./sampler-decode.js";
import { serve } from "./serve.js";
import { serveBound } from "./serve-bound.js";
import { spec } from "./spec.js";
import { stall } from "./stall.js";
import { tokenize } from "./tokenize.js";
import { webgpu } from "./webgpu.js";

export const SUITES: readonly Suite[] = [roofline, attention, paged, linalg, sampler, samplerDecode, model, serve, serveBound, stall, fairness, scale, tokenize, ggufKernels, gguf, defaultModel, floor, webgpu, embed, spec];
