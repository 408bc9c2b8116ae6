// The types openapi-typescript generates from Pictor's served document, used with openapi-fetch
// the way a developer would against a real server (see .ci/clients.sh): generate, long-poll,
// download, /me, an edit with a file upload, the history, and a refused request read through the
// generated types. Type-checked with `tsc --strict` before it runs.
//
// Environment: PICTOR_API (the API base URL, e.g. http://127.0.0.1:8080/api/pictor), PICTOR_KEY.
// The server renders with a delay, so a second job sent right after the first meets it active.

import createClient from "openapi-fetch";
import type { components, paths } from "./generated/pictor.js";

type JobView = components["schemas"]["JobView"];
type ErrorBody = components["schemas"]["ErrorBody"];
type ModelName = components["schemas"]["ModelName"];

function check(condition: boolean, message: string): asserts condition {
  if (!condition) throw new Error(`typescript client smoke test failed: ${message}`);
}

function pngSize(bytes: Uint8Array<ArrayBuffer>): [number, number] {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  check(view.getUint32(0) === 0x89504e47 && view.getUint32(12) === 0x49484452, "not a PNG");
  return [view.getUint32(16), view.getUint32(20)];
}

const api = process.env.PICTOR_API;
const key = process.env.PICTOR_KEY;
check(api !== undefined && key !== undefined, "set PICTOR_API and PICTOR_KEY");

const client = createClient<paths>({
  baseUrl: api,
  headers: { Authorization: `Bearer ${key}` },
});

async function waitDone(jobId: string): Promise<JobView> {
  for (let i = 0; i < 10; i++) {
    const { data, error } = await client.GET("/v1/jobs/{job_id}", {
      params: { path: { job_id: jobId }, query: { wait: 60 } },
    });
    check(data !== undefined, `poll: ${JSON.stringify(error)}`);
    if (data.status === "done" || data.status === "failed") return data;
  }
  throw new Error(`${jobId} did not finish`);
}

async function download(url: string | undefined): Promise<Uint8Array<ArrayBuffer>> {
  check(url !== undefined, "no photo_url");
  const response = await fetch(url);
  check(response.ok, `download: ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

const me = await client.GET("/v1/me");
check(me.data !== undefined, `me: ${JSON.stringify(me.error)}`);
const start = me.data.balance;

const models = await client.GET("/v1/models");
check(models.data?.models.some((m) => m.id === "fast") === true, "no fast model");

const model: ModelName = "fast";
const request = { prompt: "a red fox in a snowy forest", model, ratio: "16:9", seed: 7 } as const;
const created = await client.POST("/v1/generate", { body: request });
check(created.data !== undefined, `generate: ${JSON.stringify(created.error)}`);
check(created.data.status === "queued", "not queued");

// One active job per user: the second is refused with 409 job_busy, typed as ErrorBody.
const busy = await client.POST("/v1/generate", { body: request });
check(busy.response.status === 409, `expected 409, got ${busy.response.status}`);
const busyError: ErrorBody | undefined = busy.error;
check(busyError?.error_code === "job_busy" && busyError.ok === false, JSON.stringify(busyError));

const job = await waitDone(created.data.job_id);
check(job.status === "done", JSON.stringify(job));
const picture = await download(job.photo_url);
const [w, h] = pngSize(picture);
check(w === 1024 && h === 576 && job.width === w && job.height === h, `size ${w}x${h}`);

// The edit is a multipart form: the generated type names the parts, the serializer builds it.
const edited = await client.POST("/v1/edit", {
  body: { image: "fox.png", prompt: "make it black and white" },
  bodySerializer(body) {
    const form = new FormData();
    form.append("image", new Blob([picture], { type: "image/png" }), body.image);
    form.append("prompt", body.prompt);
    return form;
  },
});
check(edited.data !== undefined, `edit: ${JSON.stringify(edited.error)}`);
const editJob = await waitDone(edited.data.job_id);
check(editJob.status === "done" && editJob.kind === "edit", JSON.stringify(editJob));
const [ew, eh] = pngSize(await download(editJob.photo_url));
check(ew === 1024 && eh === 576, `edit size ${ew}x${eh}`);

const history = await client.GET("/v1/jobs", { params: { query: { limit: 10 } } });
const ids = history.data?.jobs.map((j) => j.job_id) ?? [];
check(
  ids.length === 2 && ids[0] === edited.data.job_id && ids[1] === created.data.job_id,
  `history ${ids}`,
);

const after = await client.GET("/v1/me");
check(
  after.data?.balance === start - created.data.cost - edited.data.cost,
  `balance ${start} -> ${after.data?.balance}`,
);
console.log("typescript client: generate, long-poll, download, /me, edit upload, history, job_busy: ok");
