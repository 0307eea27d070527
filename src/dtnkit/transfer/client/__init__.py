"""The client half of the mover (``dtnkit cp``), layered bottom-up:

``errors`` (the error family) -> ``verify`` (verify modes, levels, the verify plan) ->
``retry`` (the one retry policy) -> ``autostreams`` (the ``--streams auto`` formula) ->
``policy`` (the stream policy: how many streams, when one joins) -> ``request`` (what a copy
is asked to do, the copy as it runs, what it did) -> ``pace`` and ``session`` (connections,
URLs, redirects, small requests) -> ``journals`` and ``upload_session`` -> ``ends`` (block
sources and sinks) -> ``oneput`` (one PUT of a whole body) -> ``first`` (a download's first
request) -> ``engine`` (the streams that pair any source with any sink) -> ``download`` /
``upload`` / ``relay`` (one file each way)
-> ``copy`` (trees, jobs, ``copy()``); ``tpc`` (third-party copy requests) beside them.
"""
