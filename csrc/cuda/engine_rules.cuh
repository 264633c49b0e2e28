// The host side of the bin rules: the exact branch-free float rule of single precision, the
// approximate-root FastRule, the float filter's rule of double precision, and the edges
// they are built from.
// Part of engine.cu, which includes it after the definition of Histogrammer::Impl;
// never compiled on its own.
#ifndef FASTRDF_ENGINE_PART
#error "a part of csrc/cuda/engine.cu, included by it only"
#endif

namespace fastrdf::gpu {

namespace {

float float_of(uint32_t u) {
    float x;
    std::memcpy(&x, &u, 4);
    return x;
}

// The bits of the smallest non-negative float r2 for which pred(r2) holds, for a predicate that
// never turns false again as r2 grows (+inf's bits when it holds nowhere below).
template <class Pred>
uint32_t first_float(Pred pred) {
    uint32_t lo = 0, hi = 0x7f800000u;  // +inf
    if (pred(float_of(lo))) return lo;
    while (hi - lo > 1) {
        const uint32_t mid = lo + (hi - lo) / 2;
        (pred(float_of(mid)) ? hi : lo) = mid;
    }
    return hi;
}

}  // namespace

inline bool Histogrammer::Impl::use_fast_rule() const { return fast_ok && !exact_only; }

// Calls f(rule) with this frame's bin rule and returns its name: for T = float the
// approximate-root FastRule (AllowFast, exact_sqrt=False) or the branch-free FloatRule
// when the host could derive its limits, else ExactRule<T>. The float rules exist only
// for T = float, so no double kernel is compiled with them.
template <typename T, bool AllowFast, class F>
inline const char* Histogrammer::Impl::with_rule(const Binning<T>& bin, F&& f) const {
    if constexpr (std::is_same<T, float>::value) {
        if constexpr (AllowFast && FASTRDF_CUDA_FAST_RULE) {
            if (use_fast_rule()) {
                f(fast_rule);
                return "fast";
            }
        }
        if (float_ok) {
            const FloatRule<false>& fr = float_rule;
            if (fr.rmin == 0.f && fr.lo2 == 0.f)  // ranges from 0: two instructions less
                f(FloatRule<true>{fr.lo2, fr.hi2, fr.rmin, fr.norm, fr.last});
            else
                f(fr);
            return "exact";
        }
    }
    f(ExactRule<T>{bin});
    return "exact";
}

inline void Histogrammer::Impl::build_fast_rule(const FrameProblem& p) {
    const Binning<float> bin = make_binning<float>(p, edges_f.data());
    const int nb = p.nbins;
    // the CPU kernel's float bin of r2, and whether r2 is in range
    auto bin_of = [&](float r2) { return bin.fast_bin(std::sqrt(r2)); };
    auto bits = [](float x) { uint32_t u; std::memcpy(&u, &x, 4); return u; };
    auto flt = [](uint32_t u) { float x; std::memcpy(&x, &u, 4); return x; };
    // smallest non-negative float satisfying a predicate that never turns false again
    auto first = [&](auto pred) -> uint32_t {
        uint32_t lo = 0, hi = 0x7f800000u;  // +inf
        if (pred(flt(lo))) return lo;
        while (hi - lo > 1) {
            const uint32_t mid = lo + (hi - lo) / 2;
            (pred(flt(mid)) ? hi : lo) = mid;
        }
        return hi;
    };
    const uint32_t lo_u = first([&](float r2) { return std::sqrt(r2) >= bin.rmin; });
    const uint32_t above_u = first([&](float r2) { return std::sqrt(r2) > bin.rmax; });
    fast_ok = above_u > lo_u;  // some r2 in range
    float_rule.lo2 = flt(lo_u);
    float_rule.hi2 = above_u > lo_u ? flt(above_u - 1) : -1.0f;  // none: nothing in range
    float_rule.rmin = bin.rmin;
    float_rule.norm = bin.norm;
    float_rule.last = nb - 1;
    // raw(): bin nbins at most (r == rmax and rounding), for its one extra slot
    const float f_hi = above_u > lo_u ? bin.coordinate(std::sqrt(float_rule.hi2)) : 0.f;
    float_ok = bin.norm < 1e12f && static_cast<int>(f_hi) <= nb;
    if (exact_only) {
        fast_ok = false;
        return;
    }
    std::vector<float> t2(nb + 1);
    t2[0] = 0.f;
    t2[nb] = INFINITY;
    for (int k = 1; k < nb && fast_ok; ++k) {
        const uint32_t u = first([&](float r2) {
            return bits(r2) >= above_u || (bits(r2) >= lo_u && bin_of(r2) >= k);
        });
        t2[k] = u >= above_u ? INFINITY : flt(u);
    }
    // error bound of the approximate coordinate: sqrt.approx.f32 is within 2^-22 relative
    // (PTX ISA); take 2^-21, plus a few ulp of the coordinate itself
    const double e = double(bin.norm) * double(bin.rmax) * std::ldexp(1.0, -21) +
                     double(nb) * std::ldexp(1.0, -20);
    fast_rule.lo2 = flt(lo_u);
    fast_rule.hi2 = flt(above_u - 1);
    fast_rule.rmin = bin.rmin;
    fast_rule.norm = bin.norm;
    fast_rule.delta = static_cast<float>(2.0 * e);
    fast_rule.nbins = nb;
    fast_ok = fast_ok && 2.0 * e < 0.25;
    if (fast_ok) {
        dev_t2.reserve(t2.size(), "the bin thresholds");
        check(cudaMemcpy(dev_t2.ptr, t2.data(), t2.size() * sizeof(float), cudaMemcpyHostToDevice),
              "cudaMemcpy(thresholds)");
        fast_rule.t2 = dev_t2.ptr;
    }
}

// the frame's filter runs from 0 (FilterFrom0, the approximate root; as with_rule decides)
inline bool Histogrammer::Impl::filter_from0(const FloatRule<false>& fr) {
    return fr.rmin == 0.f && fr.lo2 == 0.f;
}

// The float rule of the filter for a frame whose bound is delta (double_filter_delta, bins):
// with d = delta rounded up to a multiple of 2^-20 (so that nbins + d and 1/2 - d are exact
// in double), r2 is in its range when the float coordinate f of r2 lies within [-d, L], L the
// largest float <= nbins + d (lo2, hi2 by bisection over the float bit patterns, as for the
// single-precision rule: f never decreases with r2); near: the largest float <= 1/2 - d (from
// 0: the flag is |f - (trunc f + 1/2)| >= near) or d (|f - rint f| <= d). False when no such
// rule can be built (then the frame runs all in double). See docs/design.rst, section "The
// float filter on the GPU".
inline bool Histogrammer::Impl::build_filter_rule(const FrameProblem& p, double delta,
                                                  FloatRule<false>& fr, float& near) const {
    const Binning<float> bin = make_binning<float>(p, edges_f.data());
    if (!(bin.norm < 1e12f) || !(delta >= 0.0)) return false;
    const double d = std::ceil(delta * 0x1p20) * 0x1p-20;
    if (!(d < 0.25)) return false;
    const double top = double(p.nbins) + d;
    float top_f = static_cast<float>(top);
    if (double(top_f) > top) top_f = std::nextafter(top_f, 0.f);
    const float bottom = static_cast<float>(-d);  // exact
    auto coordinate = [&](float r2) { return bin.coordinate(std::sqrt(r2)); };
    const uint32_t lo_u = first_float([&](float r2) { return coordinate(r2) >= bottom; });
    const uint32_t above_u = first_float([&](float r2) { return !(coordinate(r2) <= top_f); });
    fr.lo2 = float_of(lo_u);
    fr.hi2 = above_u > lo_u ? float_of(above_u - 1) : -1.0f;  // none: nothing in range
    fr.rmin = bin.rmin;
    fr.norm = bin.norm;
    fr.last = p.nbins - 1;
    if (fr.rmin == 0.f && fr.lo2 == 0.f) {
        const double h = 0.5 - d;
        near = static_cast<float>(h);
        if (double(near) > h) near = std::nextafter(near, 0.f);
    } else {
        near = static_cast<float>(d);
    }
    return true;
}

// Double precision: the float filter's bound for this frame (double_filter_delta; < 0: every
// pair in double) and its float rule (widened range, flag threshold)
inline Histogrammer::Impl::FrameFilter Histogrammer::Impl::frame_filter(const FrameProblem& p,
                                                                        const Frame& f) {
    FrameFilter ff;
    double& delta = ff.delta;
    FloatRule<false>& filter_fr = ff.fr;
    float& filter_near = ff.near;
    if (f.want_filter && f.n > 0) {
        const FrameImages fi = frame_images_from(f.plo, f.phi, f.max_abs);
        delta = double_filter * double_filter_delta(p, fi);
        if (delta >= 0.0 && !build_filter_rule(p, delta, filter_fr, filter_near)) delta = -1.0;
        if (delta >= 0.0 && filter_from0(filter_fr)) {
            // from 0 the filter's coordinate takes the approximate root (filter.cuh): the
            // bound with the error measured on this device, and at least the CPU's (the
            // widened range is the CPU coordinate's)
            if (sqrt_err < 0.0) sqrt_err = sqrt_approx_error(device);
            const double root_u = sqrt_err * 0x1p24 * (1.0 + 0x1p-20) + 0x1p-20;
            const double dg = double_filter_delta(p, fi, FilterArithmetic{root_u, 2.0});
            delta = dg >= 0.0 ? std::max(delta, double_filter * dg) : -1.0;
            if (delta >= 0.0 && !build_filter_rule(p, delta, filter_fr, filter_near)) delta = -1.0;
            if (delta >= 0.0 && !filter_from0(filter_fr)) delta = -1.0;  // (cannot happen)
        }
    }
    return ff;
}

inline void Histogrammer::Impl::upload_edges(const FrameProblem& p) {
    if (edges.size() == static_cast<std::size_t>(p.nbins + 1) &&
        std::equal(edges.begin(), edges.end(), p.edges))
        return;
    check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
    edges.assign(p.edges, p.edges + p.nbins + 1);
    edges_f.assign(edges.begin(), edges.end());
    dev_edges_d.reserve(edges.size(), "the bin edges");
    dev_edges_f.reserve(edges.size(), "the bin edges");
    check(cudaMemcpy(dev_edges_d.ptr, edges.data(), edges.size() * sizeof(double),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy(edges)");
    check(cudaMemcpy(dev_edges_f.ptr, edges_f.data(), edges_f.size() * sizeof(float),
                     cudaMemcpyHostToDevice),
          "cudaMemcpy(edges)");
    build_fast_rule(p);
}

}  // namespace fastrdf::gpu
