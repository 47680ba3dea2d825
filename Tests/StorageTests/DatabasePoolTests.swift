import PostgresNIO
import Testing

@testable import Settings
@testable import Storage

@Suite struct DatabasePoolTests {
    /// A service keeps every connection open (no idle timers: a cancelled timer's sleeping task holds memory until its
    /// deadline); a short job opens them on demand. Both stop at `database_connections`.
    @Test func aServiceAsksThePoolForEveryConnectionAndAJobOnlyForWhatItUses() throws {
        var url = try DatabaseURL(parsing: "postgres://pushchat:secret@127.0.0.1:5432/pushchat")
        url.connections = 7
        let service = url.clientConfiguration(route: .direct, applicationName: "pushchat-api", keepOpen: true).options
        #expect(service.minimumConnections == 7)
        #expect(service.maximumConnections == 7)
        let job = url.clientConfiguration(route: .direct, applicationName: "pushchat-feedback", keepOpen: false).options
        #expect(job.minimumConnections == 0)
        #expect(job.maximumConnections == 7)
    }
}
