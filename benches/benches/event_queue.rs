//! Micro-benchmarks of the engine's event queue: the hold model (pop the
//! earliest event, push one a random delay later) at several populations,
//! against `std::collections::BinaryHeap` as a baseline.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use netsim_engine::{Event, EventQueue, NodeId, NodeRng, SimTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

const HOLDS: u64 = 100_000;

fn hold(c: &mut Criterion) {
    let mut group = c.benchmark_group("hold");
    group.throughput(Throughput::Elements(HOLDS));
    for population in [1_024u32, 16_384, 262_144] {
        group.bench_with_input(
            BenchmarkId::new("netsim_radix", population),
            &population,
            |b, &population| {
                let mut rng = NodeRng::new(1, NodeId(0));
                let mut queue = EventQueue::default();
                let mut seq = 0u64;
                for n in 0..population {
                    let time = SimTime(rng.exponential(1e6) as u64);
                    queue.push(Event::new(time, NodeId(n), 0, NodeId(n), 0u64));
                }
                b.iter(|| {
                    for _ in 0..HOLDS {
                        let top = queue.pop().unwrap();
                        seq += 1;
                        let time = top.time + SimTime(rng.exponential(1e6) as u64);
                        queue.push(Event::new(time, top.target, seq, top.target, seq));
                    }
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("std_binary_heap", population),
            &population,
            |b, &population| {
                let mut rng = NodeRng::new(1, NodeId(0));
                let mut heap = BinaryHeap::with_capacity(population as usize);
                let mut seq = 0u64;
                for n in 0..population {
                    let time = rng.exponential(1e6) as u64;
                    heap.push(Reverse((time, n, 0u64, 0u64)));
                }
                b.iter(|| {
                    for _ in 0..HOLDS {
                        let Reverse((time, n, _, _)) = heap.pop().unwrap();
                        seq += 1;
                        let time = time + rng.exponential(1e6) as u64;
                        heap.push(Reverse((time, n, seq, seq)));
                    }
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, hold);
criterion_main!(benches);
