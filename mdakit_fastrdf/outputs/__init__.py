"""What users do with results: save and load them (:mod:`.io`), plot them (:mod:`.plotting`)
and the command-line tool (:mod:`.cli`). Nothing here knows an analysis by name: each
analysis declares its outputs (:class:`~mdakit_fastrdf.analysis.base.OutputSpec`)."""
