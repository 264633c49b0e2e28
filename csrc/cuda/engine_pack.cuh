// Frame packing: the frame's slot of pinned memory, its coordinates packed into it (float4: x, y,
// z and the exclusion label's bits) on several threads with their bounds, and its copy to the
// device on the copy stream.
// Part of engine.cu, which includes it after the definition of Histogrammer::Impl;
// never compiled on its own.
#ifndef FASTRDF_ENGINE_PART
#error "a part of csrc/cuda/engine.cu, included by it only"
#endif

namespace fastrdf::gpu {

namespace {

// The lowest and highest of each of three values over all taken (constant indices only, so
// that each stays in a register).
template <typename T>
struct Bounds3 {
    T lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    void take(T a, T b, T c) {
        lo[0] = std::min(lo[0], a);
        lo[1] = std::min(lo[1], b);
        lo[2] = std::min(lo[2], c);
        hi[0] = std::max(hi[0], a);
        hi[1] = std::max(hi[1], b);
        hi[2] = std::max(hi[2], c);
    }
};

// The bounds of one thread's span of atoms (pack_span): of x, y, z and (Projections) f_k . x.
struct Span {
    bool finite = true;
    Bounds3<float> xyz;
    Bounds3<double> proj;
};

// Packs atoms [b, e) of xyz into packed and takes their bounds into sp; with Projections also
// those of f_k . x (fco: image_coefficients).
template <bool Projections>
void pack_span(const FrameProblem& p, const float* xyz, float4* packed, const double (&fco)[3][3],
               std::size_t b, std::size_t e, Span& sp) {
    bool fin = true;
    Bounds3<float> bx;
    Bounds3<double> bp;
    for (std::size_t i = b; i < e; ++i) {
        const float x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
        fin &= std::isfinite(x) & std::isfinite(y) & std::isfinite(z);
        bx.take(x, y, z);
        const int32_t lab = p.labels ? p.labels[i] : 0;
        float w;
        std::memcpy(&w, &lab, sizeof(float));
        packed[i] = make_float4(x, y, z, w);
        if constexpr (Projections) {
            const double xd = x, yd = y, zd = z;
            const double v0 = fco[0][0] * xd + fco[0][1] * yd + fco[0][2] * zd;
            const double v1 = fco[1][0] * xd + fco[1][1] * yd + fco[1][2] * zd;
            const double v2 = fco[2][0] * xd + fco[2][1] * yd + fco[2][2] * zd;
            bp.take(v0, v1, v2);
        }
    }
    sp.proj = bp;
    sp.finite = fin;
    sp.xyz = bx;
}

}  // namespace

// Takes slot s of the frame slots (waits for the copy that last used it) and sizes it for n
// atoms and the images.
template <typename T>
inline Histogrammer::Impl::Frame Histogrammer::Impl::take_slot(const FrameProblem& p, std::size_t n) {
    Frame f;
    f.n = n;
    f.s = slot;
    slot ^= 1;
    const int s = f.s;
    constexpr bool kDouble = std::is_same<T, double>::value;
    // double precision through the float filter (filter.cuh), unless it is off
    f.want_filter = kDouble && double_filter > 0.0;
    f.atom_bytes = n * sizeof(float4);
    // the triclinic images in T, then (double: for the filter's float kernels) in float
    f.n_img = static_cast<std::size_t>(p.n_images) * 3;
    const std::size_t image_bytes = f.n_img * sizeof(T) + (kDouble ? f.n_img * sizeof(float) : 0);
    f.bytes = f.atom_bytes + image_bytes;
    check(cudaEventSynchronize(copy_done[s]), "cudaEventSynchronize");
    host_slot[s].reserve(f.bytes, "cudaMallocHost(frame buffer)");
    if (f.bytes > dev_slot[s].n) {
        check(cudaStreamSynchronize(compute), "cudaStreamSynchronize");
        dev_slot[s].reserve(f.bytes, "the frame's coordinates");
    }
    f.packed = reinterpret_cast<float4*>(host_slot[s].ptr);
    return f;
}

// Packs the frame into its slot (float4: x, y, z, label bits) and takes the bounds; large frames
// on several threads, so that the host keeps up with the GPU (1M atoms: a few ms on one core).
inline void Histogrammer::Impl::pack_frame(const FrameProblem& p, const float* xyz, Frame& f) {
    const std::size_t n = f.n;
    float4* packed = f.packed;
    // The filter's bound needs, in a triclinic box, the spread of the index arguments
    // f_k . x over the atoms (frame_images, kernel_api.hpp): taken in the same pass. (In an
    // orthorhombic box f_k . x = x_k / L_k rises with x_k, and rounding is monotone, so the
    // extremes are those of the coordinates' bounds, below: no pass.)
    const bool projections = f.want_filter && p.box_kind == kTriclinic;
    double (&fco)[3][3] = f.fco;
    image_coefficients(p, fco);
    auto pack = [&](std::size_t b, std::size_t e, Span& sp) {
        if (projections)
            pack_span<true>(p, xyz, packed, fco, b, e, sp);
        else
            pack_span<false>(p, xyz, packed, fco, b, e, sp);
    };
    const int n_pack = n >= (1u << 18)
                           ? static_cast<int>(std::clamp<std::size_t>(n >> 17, 1, pack_threads))
                           : 1;
    std::vector<Span> spans(n_pack);
    {
        std::vector<std::thread> workers;
        const std::size_t chunk = (n + n_pack - 1) / n_pack;
        for (int t = 1; t < n_pack; ++t)
            workers.emplace_back(pack, std::min(n, t * chunk), std::min(n, (t + 1) * chunk),
                                 std::ref(spans[t]));
        pack(0, std::min(n, chunk), spans[0]);
        for (auto& w : workers) w.join();
    }
    bool finite = true;
    float (&lo)[3] = f.lo, (&hi)[3] = f.hi;
    double (&plo)[3] = f.plo, (&phi)[3] = f.phi;
    if (projections)
        for (int k = 0; k < 3; ++k) {
            plo[k] = INFINITY;
            phi[k] = -INFINITY;
        }
    for (const Span& sp : spans) {
        finite &= sp.finite;
        for (int d = 0; d < 3; ++d) {
            lo[d] = std::min(lo[d], sp.xyz.lo[d]);
            hi[d] = std::max(hi[d], sp.xyz.hi[d]);
            if (projections) {
                plo[d] = std::min(plo[d], sp.proj.lo[d]);
                phi[d] = std::max(phi[d], sp.proj.hi[d]);
            }
        }
    }
    float max_abs = 0.f;
    for (int d = 0; d < 3 && n > 0; ++d) max_abs = std::max({max_abs, -lo[d], hi[d]});
    f.max_abs = max_abs;
    check_coordinates(p, finite, max_abs);
    if (f.want_filter && (p.box_kind == kOrtho || p.box_kind == kOrthoScaled))
        for (int k = 0; k < 3; ++k) {  // f_kk x_k, as frame_images takes it, at the extremes
            plo[k] = fco[k][k] * double(lo[k]);
            phi[k] = fco[k][k] * double(hi[k]);
        }
}

// Writes the images into the frame's slot (T, then in float for the filter's kernels of double
// precision) and copies the slot to the device on the copy stream, after the kernels that last
// read it; the compute stream waits for the copy.
template <typename T>
inline void Histogrammer::Impl::copy_frame(const FrameProblem& p, const Frame& f) {
    constexpr bool kDouble = std::is_same<T, double>::value;
    const int s = f.s;
    const std::size_t atom_bytes = f.atom_bytes, n_img = f.n_img;
    T* images = reinterpret_cast<T*>(host_slot[s].ptr + atom_bytes);
    for (std::size_t k = 0; k < n_img; ++k) images[k] = static_cast<T>(p.images[k]);
    float* images_f = reinterpret_cast<float*>(host_slot[s].ptr + atom_bytes + n_img * sizeof(T));
    if (kDouble)
        for (std::size_t k = 0; k < n_img; ++k) images_f[k] = static_cast<float>(p.images[k]);

    check(cudaStreamWaitEvent(copy, kernel_done[s], 0), "cudaStreamWaitEvent");
    check(cudaMemcpyAsync(dev_slot[s].ptr, host_slot[s].ptr, f.bytes, cudaMemcpyHostToDevice, copy),
          "cudaMemcpyAsync(coordinates)");
    check(cudaEventRecord(copy_done[s], copy), "cudaEventRecord");
    check(cudaStreamWaitEvent(compute, copy_done[s], 0), "cudaStreamWaitEvent");
}

}  // namespace fastrdf::gpu
