// The direct k-space sum on a GPU against the CPU kernel of the same machine (issue 28):
// max |GPU - CPU| / sqrt(N_a), bitwise repeat of the GPU, GPU time (best of 3 after a warm-up)
// and the CPU time (16 threads). Built and run by kspace_run.sh; the adk water case needs
// pos.bin / box.bin (float64, written by kspace_run.sh with MDAnalysis when it is there).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include "fastrdf/cpu.hpp"
#include "fastrdf/kspace.hpp"
#include "fastrdf/kspace_cuda.hpp"
using namespace fastrdf;
static std::vector<char> rd(const char* f){ FILE* fp=*f ? fopen(f,"rb") : nullptr; if(!fp) return {}; fseek(fp,0,SEEK_END); long n=ftell(fp); fseek(fp,0,SEEK_SET); std::vector<char> v(n); fread(v.data(),1,n,fp); fclose(fp); return v;}
static double now(){ return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// all half-space n with |k| <= qmax
static std::vector<int32_t> vectors(const double* B, double qmax){
  double inv[9]; kspace::invert_box(B, inv);
  std::vector<int32_t> out; int bnd[3];
  for(int c=0;c<3;++c){ double L=std::sqrt(B[3*c]*B[3*c]+B[3*c+1]*B[3*c+1]+B[3*c+2]*B[3*c+2]); bnd[c]=(int)std::floor(qmax*L/(2*M_PI)+1e-9); }
  for(int a=0;a<=bnd[0];++a) for(int b=-bnd[1];b<=bnd[1];++b) for(int c=-bnd[2];c<=bnd[2];++c){
    if(!(a>0 || (a==0&&b>0) || (a==0&&b==0&&c>0))) continue;
    double k[3]; for(int d=0;d<3;++d) k[d]=2*M_PI*(a*inv[d*3+0]+b*inv[d*3+1]+c*inv[d*3+2]);
    // k = 2 pi n inv^T: k_d = 2 pi sum_c n_c inv[d][c]
    if(k[0]*k[0]+k[1]*k[1]+k[2]*k[2] <= qmax*qmax){ out.push_back(a); out.push_back(b); out.push_back(c);} }
  return out;
}
static void run_case(const char* name, const std::vector<double>& pos, const std::vector<int64_t>& off, const double* B, double qmax, int threads, gpu::KSpaceSums& g){
  size_t na=pos.size()/3; int ns=(int)off.size()-1;
  double inv[9]; kspace::invert_box(B, inv);
  std::vector<double> s(3*na); kspace::fractional(pos.data(), na, inv, s.data());
  auto nv=vectors(B,qmax); long M=nv.size()/3;
  auto plan=std::make_shared<const kspace::Plan>(kspace::make_plan(nv.data(), M));
  size_t slots=plan->slots.size();
  std::vector<double> ac(2*ns*slots,0.0), ag(2*ns*slots), ag2(2*ns*slots);
  cpu::KSpaceProblem p; p.s=s.data(); p.n_atoms=na; p.offsets=off.data(); p.n_species=ns; p.plan=plan.get(); p.acc=ac.data(); p.n_threads=threads;
  auto fn = __builtin_cpu_supports("avx2") ? &cpu::avx2::kspace_sums : &cpu::baseline::kspace_sums;
  double t0=now(); fn(p); double tc=now()-t0;
  g.run(s.data(), na, off.data(), ns, plan, ag.data());   // warm-up (allocations, tasks)
  double best=1e9; for(int r=0;r<3;++r){ t0=now(); g.run(s.data(), na, off.data(), ns, plan, ag2.data()); best=std::min(best, now()-t0);} 
  bool same = ag==ag2;
  double worst=0;
  for(int a=0;a<ns;++a){ double sq=std::sqrt(std::max<int64_t>(1, off[a+1]-off[a]));
    for(size_t k=0;k<slots;++k){ if(plan->slots[k]<0) continue; double dx=ag[2*(a*slots+k)]-ac[2*(a*slots+k)], dy=ag[2*(a*slots+k)+1]-ac[2*(a*slots+k)+1]; worst=std::max(worst, std::hypot(dx,dy)/sq);} }
  auto& l=g.last_launch();
  printf("%-22s N=%7zu species=%d M=%7ld | CPU %2d thr %8.4f s | GPU %8.5f s (%.1f G k-atom/s) | max|GPU-CPU|/sqrt(N_a) %.2e | GPU repeat bitwise %s | tasks %lld blocks %lld chunk %d sc %lld x %lld tables %.1f MB\n",
    name, na, ns, M, threads, tc, best, na*(double)M/best/1e9, worst, same?"yes":"NO", l.tasks, l.blocks, l.chunk_atoms, l.super_chunk, l.super_chunks, l.table_bytes/1e6);
}
int main(int argc, char** argv){
  gpu::KSpaceSums g(0);
  std::mt19937_64 rng(42); std::uniform_real_distribution<double> U(0,1);
  { double B[9]={30,0,0, 6,28,0, -4,5,33}; std::vector<double> pos; size_t N=3000; for(size_t j=0;j<N;++j){ double s[3]={U(rng)*1.6-0.3,U(rng)*1.6-0.3,U(rng)*1.6-0.3}; for(int d=0;d<3;++d) pos.push_back(s[0]*B[d]+s[1]*B[3+d]+s[2]*B[6+d]); }
    run_case("triclinic 3 species", pos, {0,1000,1000,3000}, B, 3.0, 16, g); }
  { auto P=rd(argc > 1 ? (std::string(argv[1]) + "/pos.bin").c_str() : ""), Bx=rd(argc > 1 ? (std::string(argv[1]) + "/box.bin").c_str() : ""); if(!P.empty()){ std::vector<double> pos((double*)P.data(), (double*)P.data()+P.size()/8); const double* B=(double*)Bx.data();
      run_case("adk OW q<=2", pos, {0,(int64_t)(pos.size()/3)}, B, 2.0, 16, g);
      run_case("adk OW q<=3.2", pos, {0,(int64_t)(pos.size()/3)}, B, 3.2, 16, g);} }
  { double L=144.0; double B[9]={L,0,0,0,L,0,0,0,L}; size_t N=300000; std::vector<double> pos(3*N); for(auto& x:pos) x=U(rng)*L;
    std::vector<int64_t> off; for(int a=0;a<=9;++a) off.push_back((int64_t)(N*a/9));
    run_case("300k atoms 9 sp q<=1", pos, off, B, 1.0, 16, g);
    run_case("300k atoms 9 sp q<=2", pos, off, B, 2.0, 16, g); }
}
