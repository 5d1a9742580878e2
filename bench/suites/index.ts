// Every benchmark suite, by the name `npm run bench -- <suite>` takes.
import type { Suite } from "../harness.js";
import { linalg } from "./linalg.js";
import { roofline } from "./roofline.js";

export const SUITES: readonly Suite[] = [roofline, linalg];
