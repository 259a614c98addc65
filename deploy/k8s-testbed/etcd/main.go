// Command etcd is the etcd server, built from the published
// go.etcd.io/etcd/server/v3 module. etcd's own main module (go.etcd.io/etcd/v3)
// uses replace directives and cannot be built from outside its repository,
// so this calls the same entry point its main.go calls.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
