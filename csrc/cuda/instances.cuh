// The instantiation matrix of the GPU kernels, written once: the box types every launcher is
// instantiated for, the rules of each, and the boxes of the float filter. allpairs.cuh and
// cells.cuh declare their launchers' instances from these lists (extern); each
// <method>_<box>[_filter[_min]].cu defines one row of them.
#pragma once

// X(B) for every box template of the kernels.
#define FASTRDF_BOXES(X)                                                                   \
    X(NoBox) X(OrthoBox) X(OrthoBoxScaled) X(OrthoSlabBox) X(TriclinicSlab)                \
    X(TriclinicNoImages) X(TriclinicImages)
// X(B, F) for every box template of the float filter, with its filter rule F.
#define FASTRDF_FILTER_BOXES(X, F) \
    X(NoBox, F) X(OrthoBox, F) X(OrthoBoxScaled, F) X(TriclinicNoImages, F) X(TriclinicImages, F)
// The rules that Histogrammer::Impl::with_rule hands launcher L of box template B. EXTERN:
// `extern` (declarations) or nothing (definitions).
#define FASTRDF_RULE_INSTANCES(L, EXTERN, B)                 \
    EXTERN template L(float, B<float>, FloatRule<true>);     \
    EXTERN template L(float, B<float>, FloatRule<false>);    \
    EXTERN template L(float, B<float>, ExactRule<float>);    \
    EXTERN template L(double, B<double>, ExactRule<double>)
