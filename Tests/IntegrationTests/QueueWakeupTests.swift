import Foundation
import PostgresNIO
import Settings
import Storage
import Testing

/// The hot writers queue rows without a NOTIFY in their own transaction (migrations/034: a NOTIFY holds a lock until its
/// commit is on disk, so every chat message flushed the WAL alone); each wakes the daemons once, after its commit, with
/// the lowest message id it queued, as the insert trigger did.
@Suite struct QueueWakeupTests {
    @Test func chatProviderAndBroadcastWritersEachWakeTheDaemonsOnceAfterTheirCommit() async throws {
        try await TestDatabase.withFreshDatabase { url in
            try await BroadcastTests.seedDevices(url, count: 30)
            try await TestDatabase.withDatabaseClient(url) { database in
                try await TestDatabase.withConnection(url) { listener in
                    try await listener.listen(on: "push_queue") { notifications in
                        var payloads = notifications.makeAsyncIterator()
                        let chat = ChatStore(database: database, logger: TestDatabase.logger)
                        let udid = { (n: Int) in String(format: "%040x", n) }
                        for n in 1...3 {
                            #expect(
                                try await chat.join(
                                    udid: udid(n),
                                    token: PushHarness.token(100 + n),
                                    name: "u\(n)",
                                    code: "room",
                                    ipAddress: nil
                                )
                            )
                        }
                        #expect(try await chat.message(udid: udid(1), text: "hi").queued == 2)
                        let lowest = { (condition: String) in
                            try await TestDatabase.scalar(
                                url,
                                PostgresQuery(unsafeSQL: "SELECT min(message_id)::text FROM push_queue WHERE \(condition)"),
                                as: String.self
                            )
                        }
                        // Received after the commit: the rows it names are there.
                        let chatWake = try await payloads.next()?.payload
                        #expect(chatWake == (try await lowest("notification_id IS NULL")))

                        let store = ProviderStore(database: database, logger: TestDatabase.logger)
                        let users = BroadcastTests.notification(.users(["user1", "user2"]))
                        #expect(try await store.queue(users, maxRecipients: nil) == .queued(recipients: 6))
                        #expect(try await payloads.next()?.payload == (try await lowest("notification_id = '\(users.id)'")))

                        let all = BroadcastTests.notification(.all)
                        #expect(
                            try await store.queue(all, maxRecipients: nil, backgroundAbove: 0) == .accepted(recipients: 33),
                            "the devices and the chat users"
                        )
                        #expect(try await payloads.next()?.payload == "", "the broadcast's acceptance wakes an expander")
                        let broadcasts = BroadcastQueue(database: database, logger: TestDatabase.logger)
                        let next = try #require(try await broadcasts.next())
                        #expect(try await broadcasts.expand(next, limit: 10).queued == 10)
                        #expect(try await payloads.next()?.payload == (try await lowest("bulk")))

                        // Anything else (psql, an earlier release) still wakes them from the trigger.
                        try await TestDatabase.admin(url, "INSERT INTO push_queue (device_token, payload) VALUES ('psql', '{}')")
                        #expect(try await payloads.next()?.payload == (try await lowest("device_token = 'psql'")))
                        // Delivered in commit order: nothing came twice (a trigger's NOTIFY beside a writer's wakeup).
                        try await TestDatabase.admin(url, "SELECT pg_notify('push_queue', 'end')")
                        #expect(try await payloads.next()?.payload == "end")
                    }
                }
            }
        }
    }
}
