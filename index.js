// The Node entry: the napi addon is the core.
import { install } from './lib/binding.js';
import * as native from './binding.js';
install(native);
export * from './lib/api.js';
