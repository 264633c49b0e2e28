// Included first by each part of histogram.cpp (histogram_<part>.hpp). A part is included by
// histogram.cpp only, inside namespace fastrdf::cpu::FASTRDF_ISA::(anonymous), once per
// instruction set, and is never compiled on its own.
#ifndef FASTRDF_HISTOGRAM_PART
#error "a part of csrc/cpu/histogram.cpp, included by it only"
#endif
