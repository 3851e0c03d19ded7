package main

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// runRoute asks the name server for a topic's route the way the Go client does (GET_ROUTEINFO_BY_TOPIC
// through its own name-server client) and prints two views of the answer:
//   - "publishQueues": the public admin API FetchPublishMessageQueues (queues a producer would use);
//   - "route": the TopicRouteData exactly as the client parsed it, brokerAddrs included. The client
//     has no public call returning it, so the admin's name-server object is reached by reflection;
//     the parse is the client's own (gjson plus its hand split of brokerAddrs), which is the point.
func runRoute(args []string) error {
	fs := newFlags("route")
	namesrv := fs.String("n", "", "name server address host:port")
	topic := fs.String("t", "", "topic")
	fs.Parse(args)
	if *namesrv == "" || *topic == "" {
		return fmt.Errorf("route needs -n NAMESRV and -t TOPIC")
	}
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{*namesrv})))
	if err != nil {
		return fmt.Errorf("admin.NewAdmin: %w", err)
	}
	defer adm.Close()

	queues, err := adm.FetchPublishMessageQueues(context.Background(), *topic)
	if err != nil {
		return fmt.Errorf("FetchPublishMessageQueues(%s): %w", *topic, err)
	}
	route, err := parsedRoute(adm, *topic)
	if err != nil {
		return err
	}
	emit(map[string]any{"event": "route", "topic": *topic, "route": route, "publishQueues": queues})
	emit(map[string]any{"event": "done"})
	return nil
}

// parsedRoute calls admin.cli.GetNameSrv().UpdateTopicRouteInfo(topic) by reflection and returns the
// result re-marshalled as generic JSON.
func parsedRoute(adm any, topic string) (any, error) {
	v := reflect.ValueOf(adm).Elem().FieldByName("cli")
	if !v.IsValid() {
		return nil, fmt.Errorf("this rocketmq-client-go version has no admin.cli field; update route.go")
	}
	cli := reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	ns := cli.MethodByName("GetNameSrv").Call(nil)[0]
	out := ns.MethodByName("UpdateTopicRouteInfo").Call([]reflect.Value{reflect.ValueOf(topic)})
	if errv := out[2]; !errv.IsNil() {
		return nil, fmt.Errorf("UpdateTopicRouteInfo(%s): %v", topic, errv.Interface())
	}
	if out[0].IsNil() {
		return nil, fmt.Errorf("UpdateTopicRouteInfo(%s) returned no route", topic)
	}
	raw, err := json.Marshal(out[0].Interface())
	if err != nil {
		return nil, err
	}
	var generic any
	err = json.Unmarshal(raw, &generic)
	return generic, err
}
