// Every benchmark suite, by the name `npm run bench -- <suite>` takes.
import type { Suite } from "../harness.js";
import { attention } from "./attention.js";
import { defaultModel } from "./default-model.js";
import { linalg } from "./linalg.js";
import { model } from "./model.js";
import { paged } from "./paged.js";
import { roofline } from "./roofline.js";
import { sampler } from "./sampler.js";
import { serve } from "./serve.js";

export const SUITES: readonly Suite[] = [roofline, attention, paged, linalg, sampler, model, serve, defaultModel];
