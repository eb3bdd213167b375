G=/tmp/q;mkdir -p $G/opgen;cp examples/softmax/csrc/softmax.h $G/;cd $G
cat>opgen/rowwise_op.h<<'X'
#pragma once
#include <cuda_bf16.h>
#include "opgen/rowwise.h"
namespace paddle{using float16=__half;using bfloat16=__nv_bfloat16;}
namespace opgen{template<class...>struct Dtypes{};namespace rowwise{template<class...R>struct RoleList{};enum class OutRole{kElem,kRow,kColSum};struct Out{OutRole role;int like;};}}
X
cat>b.cu<<'X'
#include <cstdio>
#include "opgen/rowwise.cuh"
#include "rowwise_ops.h"
#include "softmax.h"
using namespace opgen::rowwise;typedef TT T;cudaEvent_t a,b;float cp;
template<class F,class...R,class P>void t(const char*n,F f,P p){Run<F,R...>(f,p,0,0);cudaEventRecord(a);for(int i=300;i--;)Run<F,R...>(f,p,0,0);cudaEventRecord(b);cudaEventSynchronize(b);float s;cudaEventElapsedTime(&s,a,b);s/=300;printf("%s %d %.4f %.3f\n",n,int(p.cols),s,1.5f*cp/s);}
int main(){cudaEventCreate(&a);cudaEventCreate(&b);long long S[][2]={{4096,4096},{16384,1024},{65536,256},{262144,128},{1024,32768}};
for(auto&s:S){long long n=s[0]*s[1],z=sizeof(T);T*y,*g,*d;cudaMalloc(&y,n*z);cudaMalloc(&g,n*z);cudaMalloc(&d,n*z);cudaMemset(y,0,n*z);cudaMemset(g,0,n*z);
cudaEventRecord(a);for(int i=300;i--;)cudaMemcpyAsync(d,y,n*z,cudaMemcpyDefault);cudaEventRecord(b);cudaEventSynchronize(b);cudaEventElapsedTime(&cp,a,b);cp/=300;
Pointers<T,3,1>p;p.in[0]=0;p.in[1]=y;p.in[2]=g;p.out[0]=d;p.rows=s[0];p.cols=s[1];t<softmax::Backward<T>,Elem,Elem,Elem>("gen",softmax::Backward<T>(1.0),p);
Pointers<T,2,1>q;q.in[0]=y;q.in[1]=g;q.out[0]=d;q.rows=s[0];q.cols=s[1];t<SoftmaxBackward<T>,Elem,Elem>("hand",SoftmaxBackward<T>{1.f},q);cudaFree(y);cudaFree(g);cudaFree(d);}}
X
for T in __nv_bfloat16 float;do nvcc -O3 -arch=sm_90 -DTT=$T -I/work/main/templates/{common,rowwise}/csrc -I/work/main/scripts/gpu -I. b.cu -o b$T >l$T 2>&1 & done;wait;for T in __nv_bfloat16 float;do echo $T;grep -m3 error l$T;./b$T;done
