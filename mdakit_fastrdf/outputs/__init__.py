"""What users do with results: the data they share (:mod:`.data`), saving and loading them
(:mod:`.io`) and plotting them (:mod:`.plotting`); the command-line tool is the layer above,
:mod:`mdakit_fastrdf.cli`. Nothing here knows an analysis by name: each analysis declares
its outputs (:class:`~mdakit_fastrdf.analysis.base.OutputSpec`)."""
