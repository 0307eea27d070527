"""The client half of the mover (``dtnkit cp``), layered bottom-up:

``errors`` (the error family) -> ``verify`` (verify modes, levels, the verify plan) ->
``options`` (what a copy is asked to do, what it did) -> ``session`` (URLs, redirects,
requests, retries, status checks) -> ``streams`` (the stream engine, buffer pool) ->
``journals`` (resume state) -> ``upload_session`` (the resumable upload-session requests) ->
``ends`` (block sources and sinks and the one move loop pairing them) -> ``download`` /
``upload`` / ``relay`` (one file each way) -> ``copy`` (trees, jobs, ``copy()``) and ``tpc``
(third-party copy requests).
"""
