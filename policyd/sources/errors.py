"""The one error a source raises: what failed, where, and which kind of failure it was.

Kinds (the keys of a source's `errors_total`):

* `connection`: the server could not be reached (refused, DNS, reset);
* `timeout`: no answer within the timeout (after the retries);
* `http`: a non-2xx answer, or 5xx / 429 answers until the retries ran out;
* `bad_data`: Prometheus rejected the query (HTTP 400/422, `errorType: bad_data`), e.g. a
  syntax error in the policy's evaluation query or more than 11,000 points;
* `bad_response`: an answer that is not JSON or not the documented shape;
* `auth`: the server refused policyd's credentials (HTTP 401 or 403), or a credential file
  (`bearer_token_file`, `basic_auth.password_file`) could not be read;
* `tls`: the TLS handshake failed (the server's certificate not trusted by `tls_config.ca_file`,
  a client certificate refused).
"""

from __future__ import annotations

KINDS = ("connection", "timeout", "http", "bad_data", "bad_response", "auth", "tls")


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line (newlines escaped), cut to `limit` characters."""
    flat = text.replace("\r", "\\r").replace("\n", "\\n")
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class SourceError(Exception):
    """A cycle's observation failed; the message is one line naming the URL and the query."""

    def __init__(self, *, kind: str, url: str, what: str, query: str, detail: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown source error kind {kind!r}; allowed: {', '.join(KINDS)}")
        self.kind = kind
        self.url = url
        self.what = what
        self.query = query
        self.detail = detail
        super().__init__(
            f"{url}: {what} {one_line(query, 200)!r} failed ({kind}): {one_line(detail)}")
