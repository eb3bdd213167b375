#!/usr/bin/env bash
set -e
cd /work/main
export CUDA_HOME=/usr/local/cuda
B="nvcc -O3 -std=c++17 -arch=sm_90 -I$CUDA_HOME/include/cccl -Itemplates/common/csrc"
build() { local name=$1; shift; $B "$@" -Iexamples/embedding/csrc scripts/gpu/embedding_bench.cu -o .gpu/emb52/$name; echo built $name; }
build new &
build p8 -DEMBEDDING_PIECE_ROWS=8 &
wait
build p24 -DEMBEDDING_PIECE_ROWS=24 
