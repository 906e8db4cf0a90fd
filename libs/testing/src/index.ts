/** @kvt/testing: Test fakes and builders: fake client, informer and recorder, object builders, cache-mutation guard. Only tests and e2e import it. */
export {};
