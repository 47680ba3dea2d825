import HTTP2Client
import NIOCore
import NIOPosix
import Storage

#if canImport(Glibc)
import Glibc
#endif

/// Chat first on a busy machine (issue 43, item 5; `push_broadcast_nice`): a broadcast's lanes run on threads of their
/// own at a lower CPU priority. While a broadcast drains at full speed every core is busy (the daemon, PostgreSQL, the
/// gateway's side on a small machine), and each step of a chat row (its claim's answer, the writer taking it, its
/// write, its answer) waited for a core behind the broadcast's work. Here the broadcast's connections (their event
/// loops, ``ConnectionThreads``), their drivers' claimer, writer and reader tasks (a task executor preference) and
/// their database requests' work (``DatabaseClient/executor``: decoding a claim's rows) run on threads at niceness
/// `nice`: when chat's threads and these both want a core, the kernel gives it to chat's; when nothing else wants the
/// cores, these take them all, so the broadcast's pace is the machine's as before.
final class BroadcastThreads: TaskExecutor {
    let group: MultiThreadedEventLoopGroup

    /// As many threads as cores (the daemon's shared event loops have as many), each at `nice` (1–19).
    init(nice: Int32, threads: Int = System.coreCount) {
        precondition((1...19).contains(nice))
        group = MultiThreadedEventLoopGroup(numberOfThreads: threads)
        for loop in group.makeIterator() {
            // On Linux a niceness is a thread's: 0 names the calling thread. Lowering one's own priority needs no
            // privilege; should it fail, the thread runs at the process's and the broadcast is merely not behind chat.
            _ = try? loop.submit { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice) }.wait()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        group.next().execute { job.runSynchronously(on: executor) }
    }

    /// Runs `body` with its tasks, and the connections it opens, on these threads.
    func run(_ body: () async -> Void) async {
        await withTaskExecutorPreference(self) {
            await DatabaseClient.$executor.withValue(self) {
                await ConnectionThreads.$group.withValue(group) { await body() }
            }
        }
    }

    /// Stops the threads (once the lanes that ran on them have ended).
    func shutdown() async {
        try? await group.shutdownGracefully()
    }
}
