// The instantiation matrix of the GPU kernels, written once: the box types every launcher is
// instantiated for, the rules of each, and the boxes of the float filter. allpairs.cuh and
// cells.cuh declare their launchers' instances from these lists (extern); each
// <method>_<box>[_filter[_min]].cu defines one row of them.
#pragma once

// X(A, B) for every box template B of the kernels (A: passed through).
#define FASTRDF_BOXES(X, A)                                                                \
    X(A, NoBox) X(A, OrthoBox) X(A, OrthoBoxScaled) X(A, OrthoSlabBox) X(A, TriclinicSlab) \
    X(A, TriclinicNoImages) X(A, TriclinicImages)
// X(A, B, F) for every box template B of the float filter, with its filter rule F.
#define FASTRDF_FILTER_BOXES(X, A, F)                                                   \
    X(A, NoBox, F) X(A, OrthoBox, F) X(A, OrthoBoxScaled, F) X(A, TriclinicNoImages, F) \
    X(A, TriclinicImages, F)
// The rules that Histogrammer::Impl::with_rule hands launcher L of box template B. EXTERN:
// `extern` (declarations) or nothing (definitions).
#define FASTRDF_RULE_INSTANCES(L, EXTERN, B)                 \
    EXTERN template L(float, B<float>, FloatRule<true>);     \
    EXTERN template L(float, B<float>, FloatRule<false>);    \
    EXTERN template L(float, B<float>, ExactRule<float>);    \
    EXTERN template L(double, B<double>, ExactRule<double>)
// Launcher L of the float filter's rule F (FilterFrom0 or FilterFromMin, filter.cuh) in box
// template B: double precision through float kernels, each in a translation unit of its own
// (<method>_<box>_filter[_min].cu) so that they compile in parallel.
#define FASTRDF_FILTER_INSTANCE(L, EXTERN, B, F) EXTERN template L(float, B<float>, F<B>)

// The declarations of a family's instances: INSTANCES(extern, B) for every box template B,
// and launcher L for every box and rule of the float filter.
#define FASTRDF_EXTERN_BOX(INSTANCES, B) INSTANCES(extern, B);
#define FASTRDF_EXTERN_FILTER(L, B, F) FASTRDF_FILTER_INSTANCE(L, extern, B, F);
#define FASTRDF_EXTERN_INSTANCES(INSTANCES, L)                    \
    FASTRDF_BOXES(FASTRDF_EXTERN_BOX, INSTANCES)                  \
    FASTRDF_FILTER_BOXES(FASTRDF_EXTERN_FILTER, L, FilterFrom0)   \
    FASTRDF_FILTER_BOXES(FASTRDF_EXTERN_FILTER, L, FilterFromMin)
