#!/usr/bin/env bash
# Builds scripts/gpu/embedding_bench.cu variants for sm_90 into .gpu/emb51/.
set -e
cd /work/main
export CUDA_HOME=/usr/local/cuda
B="nvcc -O3 -std=c++17 -arch=sm_90 -I$CUDA_HOME/include/cccl -Itemplates/common/csrc"
build() { local name=$1; shift; $B "$@" -Iexamples/embedding/csrc scripts/gpu/embedding_bench.cu -o .gpu/emb51/$name; echo built $name; }
build new &
build rows1 -DEMBEDDING_SUM_ROWS=1 &
wait
build rows4 -DEMBEDDING_SUM_ROWS=4 &
build rows3 -DEMBEDDING_SUM_ROWS=3 &
wait
build p32 -DEMBEDDING_PIECE_ROWS=32 &
build p16r1 -DEMBEDDING_PIECE_ROWS=16 -DEMBEDDING_SUM_ROWS=1 &
wait
build p32r4 -DEMBEDDING_PIECE_ROWS=32 -DEMBEDDING_SUM_ROWS=4 &
$B -I/tmp/emb-old /tmp/emb-old/embedding_bench.cu -o .gpu/emb51/old && echo built old &
wait
