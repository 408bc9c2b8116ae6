"""The Python client openapi-python-client generates from Pictor's served document, used the way
a developer would against a real server (see .ci/clients.sh): generate, long-poll, download, /me,
an edit with a file upload, the history, and a refused request read through the generated types.

Environment: PICTOR_API (the API base URL, e.g. http://127.0.0.1:8080/api/pictor), PICTOR_KEY.
The server renders with a delay (PICTOR_DEBUG_RENDER_DELAY_MS), so a second job sent right after
the first meets the first still active.
"""

import os
import struct
import sys

import httpx

from pictor_image_api_client import AuthenticatedClient
from pictor_image_api_client.api.account import me, models
from pictor_image_api_client.api.images import edit, generate
from pictor_image_api_client.api.jobs import get_job, list_jobs
from pictor_image_api_client.models import (
    EditBody,
    ErrorBody,
    GenerateRequest,
    JobCreated,
    JobView,
    ModelName,
    Profile,
    RatioName,
)
from pictor_image_api_client.types import File


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def wait_done(client: AuthenticatedClient, job_id: str) -> JobView:
    for _ in range(10):
        job = get_job.sync(job_id, client=client, wait=60)
        assert isinstance(job, JobView), job
        if job.status in ("done", "failed"):
            return job
    raise AssertionError(f"{job_id} did not finish")


def main() -> None:
    client = AuthenticatedClient(
        base_url=os.environ["PICTOR_API"],
        token=os.environ["PICTOR_KEY"],
        timeout=httpx.Timeout(120.0),
        raise_on_unexpected_status=True,
    )
    with client:
        profile = me.sync(client=client)
        assert isinstance(profile, Profile), profile
        start = profile.balance

        catalogue = models.sync(client=client)
        assert catalogue is not None and any(m.id == "fast" for m in catalogue.models)

        request = GenerateRequest(
            prompt="a red fox in a snowy forest",
            model=ModelName.FAST,
            ratio=RatioName("16:9"),
            seed=7,
        )
        created = generate.sync(client=client, body=request)
        assert isinstance(created, JobCreated), created
        assert created.status == "queued" and created.job_id.startswith("job_")

        # One active job per user: the second is refused with 409 job_busy.
        busy = generate.sync_detailed(client=client, body=request)
        assert busy.status_code == 409, busy
        assert isinstance(busy.parsed, ErrorBody), busy.parsed
        assert busy.parsed.error_code == "job_busy" and busy.parsed.ok is False

        job = wait_done(client, created.job_id)
        assert job.status == "done", job
        assert isinstance(job.photo_url, str)
        picture = httpx.get(job.photo_url).content
        assert png_size(picture) == (job.width, job.height) == (1024, 576), png_size(picture)

        body = EditBody(
            image=File(payload=picture, file_name="fox.png", mime_type="image/png"),
            prompt="make it black and white",
        )
        edited = edit.sync(client=client, body=body)
        assert isinstance(edited, JobCreated), edited
        edit_job = wait_done(client, edited.job_id)
        assert edit_job.status == "done" and edit_job.kind == "edit", edit_job
        assert png_size(httpx.get(edit_job.photo_url).content) == (1024, 576)

        history = list_jobs.sync(client=client, limit=10)
        assert history is not None
        assert [j.job_id for j in history.jobs] == [edited.job_id, created.job_id]

        after = me.sync(client=client)
        assert isinstance(after, Profile)
        assert after.balance == start - created.cost - edited.cost, (start, after.balance)
    print("python client: generate, long-poll, download, /me, edit upload, history, job_busy: ok")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"python client smoke test failed: {e!r}", file=sys.stderr)
        raise
