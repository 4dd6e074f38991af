/**
 * `service` with some of its methods replaced; its other methods run on the
 * service itself (its private fields are not a proxy's).
 */
export function withMethods<T extends object>(service: T, methods: Partial<T>): T {
  return new Proxy(service, {
    get(target, property) {
      if (Object.hasOwn(methods, property)) return methods[property as keyof T];
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
