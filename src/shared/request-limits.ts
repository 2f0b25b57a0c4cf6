/**
 * Cheap refusals at the edge: the longest id and scope field a public request may carry.
 * Ids are keys the services index, log and store (the scope key is part of every seal and
 * store key), so an oversize one is refused before anything is looked up, with the field
 * and the limit named. Limits are UTF-8 bytes.
 */
import { ServiceError } from "../protocol/service-error.js";

export const ID_LIMITS = {
  agent_id: 256,
  session_id: 256,
  // Session keys are composite (agent, channel, peer, thread), so they get more room.
  session_key: 512,
  agent_run_id: 256,
  code_mode_run_id: 256,
  exec_call_id: 256,
  wait_call_id: 256,
  call_id: 256,
  catalog_id: 256,
} as const;

export type IdField = keyof typeof ID_LIMITS;

/** Throws INVALID_ARGUMENT when `value` is longer than its field's limit; `path` names the field as the caller sees it. */
export function checkIdLength(field: IdField, value: string, path: string = field): void {
  const limit = ID_LIMITS[field];
  // A UTF-8 byte is at most one UTF-16 unit long, so most values skip the count.
  if (value.length * 3 <= limit) return;
  const bytes = Buffer.byteLength(value, "utf8");
  if (bytes > limit) throw new ServiceError("invalid_argument", `${path} is ${bytes} bytes, over the limit of ${limit} bytes`);
}
